// The "Server" choice of the Models panel: an OpenAI-compatible server's URL, its API key
// (kept in the settings only when "Remember key" is ticked), the model to ask for, whether a
// certificate that does not verify is acceptable, a connection test and Connect.
#pragma once

#include <QString>
#include <QWidget>

class QCheckBox;
class QLabel;
class QLineEdit;
class QPushButton;

namespace specula::ui {

class ServerPanel : public QWidget {
  Q_OBJECT

 public:
  explicit ServerPanel(QWidget* parent = nullptr);

 public Q_SLOTS:
  // What the connection test found (or why it failed), shown under the buttons.
  void showResult(bool ok, const QString& message);

 Q_SIGNALS:
  void testRequested(const QString& url, const QString& apiKey, const QString& model, bool insecure);
  void connectRequested(const QString& url, const QString& apiKey, const QString& model, bool insecure);

 private:
  // Emits `signal` with the fields, after saving them; false when there is no URL yet.
  bool request(void (ServerPanel::*signal)(const QString&, const QString&, const QString&, bool));
  void save() const;

  QLineEdit* url_;
  QLineEdit* key_;
  QCheckBox* remember_key_;
  QLineEdit* model_;
  QCheckBox* insecure_;
  QPushButton* test_;
  QPushButton* connect_;
  QLabel* result_;
};

}  // namespace specula::ui
