// The models already on this computer, found by scan_models on a thread of its own (the
// stores can be large and on slow disks) and handed to the window through a signal.
#pragma once

#include <QObject>
#include <QString>
#include <QVector>
#include <atomic>

#include "file_picker.h"
#include "model/model_scan.h"

class QThread;

namespace specula::ui {

class ModelScanner : public QObject {
  Q_OBJECT

 public:
  explicit ModelScanner(QObject* parent = nullptr);
  ~ModelScanner() override;  // cancels a scan in progress and waits for it to end

  // Scans the default stores (default_scan_roots) in the background; scanned() follows.
  // A call while a scan runs does nothing.
  void start();
  bool isScanning() const { return thread_ != nullptr; }
  const ScanResult& result() const { return result_; }  // the last finished scan

  // How the found models look in a model picker: every model, the loadable ones usable.
  QVector<FilePicker::Entry> modelEntries() const;
  // The drafts suggested for the model at `target` (none when it was not found).
  QVector<FilePicker::Entry> draftEntries(const QString& target) const;

 Q_SIGNALS:
  void scanned();

 private:
  FilePicker::Entry entry(const FoundModel& m) const;

  QThread* thread_ = nullptr;  // the scan in progress, null when none
  std::atomic<bool> cancel_{false};
  ScanResult result_;
};

}  // namespace specula::ui
