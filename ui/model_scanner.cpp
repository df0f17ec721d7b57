#include "model_scanner.h"

#include <QThread>
#include <memory>

namespace specula::ui {

ModelScanner::ModelScanner(QObject* parent) : QObject(parent) {}

ModelScanner::~ModelScanner() {
  cancel_ = true;
  if (thread_) thread_->wait();
  delete thread_;
}

void ModelScanner::start() {
  if (thread_) return;
  cancel_ = false;
  thread_ = QThread::create([this] {
    ScanOptions options;
    options.cancelled = [this] { return cancel_.load(); };
    auto found = std::make_shared<ScanResult>(scan_models(default_scan_roots(), options));
    // back on this object's thread; dropped if the scanner is gone by then
    QMetaObject::invokeMethod(
        this,
        [this, found] {
          thread_->wait();
          delete thread_;
          thread_ = nullptr;
          result_ = std::move(*found);
          Q_EMIT scanned();
        },
        Qt::QueuedConnection);
  });
  thread_->setObjectName("model scan");
  thread_->start(QThread::LowPriority);
}

FilePicker::Entry ModelScanner::entry(const FoundModel& m) const {
  QStringList facts;
  if (!m.architecture.empty()) facts << QString::fromStdString(m.architecture);
  facts << QString::fromStdString(parameter_count_label(m.parameters));
  if (!m.weight_type.empty()) facts << QString::fromStdString(m.weight_type);
  facts << QString::fromStdString(byte_count_label(m.bytes));
  FilePicker::Entry e;
  e.path = QString::fromStdString(m.path);
  e.label = tr("%1 — %2 (%3)").arg(QString::fromStdString(m.name), facts.join(' '),
                                   QString::fromStdString(std::string(model_store_name(m.store))));
  e.details = e.path;
  if (!m.aliases.empty()) {
    QStringList aliases;
    for (const std::string& a : m.aliases) aliases << QString::fromStdString(a);
    e.details += "\n" + tr("also named %1").arg(aliases.join(", "));
  }
  if (!m.loadable) {
    e.label += " " + tr("— cannot be loaded");
    e.details += "\n" + QString::fromStdString(m.problem);
  } else if (!m.drafts.empty()) {
    e.details += "\n" + tr("%n suggested draft(s)", nullptr, int(m.drafts.size()));
  }
  e.usable = m.loadable;
  return e;
}

QVector<FilePicker::Entry> ModelScanner::modelEntries() const {
  QVector<FilePicker::Entry> entries;
  for (const FoundModel& m : result_.models) entries << entry(m);
  return entries;
}

QVector<FilePicker::Entry> ModelScanner::draftEntries(const QString& target) const {
  QVector<FilePicker::Entry> entries;
  for (const FoundModel& m : result_.models) {
    if (QString::fromStdString(m.path) != target) continue;
    for (const std::string& draft : m.drafts) {
      for (const FoundModel& d : result_.models) {
        if (d.path == draft) entries << entry(d);
      }
    }
  }
  return entries;
}

}  // namespace specula::ui
