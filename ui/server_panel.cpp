#include "server_panel.h"

#include <QCheckBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>

namespace specula::ui {

ServerPanel::ServerPanel(QWidget* parent) : QWidget(parent) {
  QSettings settings;
  url_ = new QLineEdit(settings.value("server/url").toString());
  url_->setObjectName("serverUrlEdit");
  url_->setPlaceholderText(tr("http://gpu-node:8000"));
  url_->setToolTip(tr("An OpenAI-compatible server: specula-cli serve, vLLM, SGLang, llama.cpp's llama-server"));
  key_ = new QLineEdit(settings.value("server/apiKey").toString());
  key_->setObjectName("serverKeyEdit");
  key_->setEchoMode(QLineEdit::Password);
  key_->setPlaceholderText(tr("none"));
  remember_key_ = new QCheckBox(tr("Remember key"));
  remember_key_->setObjectName("rememberKeyCheck");
  remember_key_->setChecked(settings.value("server/rememberKey", false).toBool());
  remember_key_->setToolTip(tr("Keep the key in the settings file, unencrypted"));
  model_ = new QLineEdit(settings.value("server/model").toString());
  model_->setObjectName("serverModelEdit");
  model_->setPlaceholderText(tr("the first one it serves"));
  insecure_ = new QCheckBox(tr("Accept an invalid certificate"));
  insecure_->setObjectName("insecureCheck");
  insecure_->setChecked(settings.value("server/insecure", false).toBool());
  insecure_->setToolTip(tr("Only for a server you trust whose TLS certificate does not verify (self-signed)"));
  test_ = new QPushButton(tr("&Test"));
  test_->setObjectName("testServerButton");
  connect_ = new QPushButton(tr("C&onnect"));
  connect_->setObjectName("connectServerButton");
  result_ = new QLabel;
  result_->setObjectName("serverResultLabel");
  result_->setWordWrap(true);
  result_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* key_row = new QHBoxLayout;
  key_row->addWidget(key_, 1);
  key_row->addWidget(remember_key_);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(test_);
  buttons->addWidget(connect_);
  buttons->addStretch(1);
  auto* form = new QFormLayout(this);
  form->setContentsMargins(0, 0, 0, 0);
  form->addRow(tr("&URL:"), url_);
  // a row of a layout gets no buddy from addRow: the label names the key field itself, so
  // that its mnemonic works and its '&' is not shown
  auto* key_label = new QLabel(tr("API &key:"));
  key_label->setBuddy(key_);
  form->addRow(key_label, key_row);
  form->addRow(tr("Mod&el:"), model_);
  form->addRow(QString(), insecure_);
  form->addRow(QString(), buttons);
  form->addRow(result_);

  connect(test_, &QPushButton::clicked, this, [this] {
    if (request(&ServerPanel::testRequested)) result_->setText(tr("testing…"));
  });
  connect(connect_, &QPushButton::clicked, this, [this] { request(&ServerPanel::connectRequested); });
}

void ServerPanel::showResult(bool ok, const QString& message) {
  result_->setText(message);
  result_->setStyleSheet(ok ? QStringLiteral("color: #0a3622;") : QStringLiteral("color: #58151c;"));
}

bool ServerPanel::request(void (ServerPanel::*signal)(const QString&, const QString&, const QString&, bool)) {
  if (url_->text().trimmed().isEmpty()) {
    showResult(false, tr("Enter the server's URL first."));
    url_->setFocus();
    return false;
  }
  save();
  Q_EMIT(this->*signal)(url_->text().trimmed(), key_->text(), model_->text().trimmed(), insecure_->isChecked());
  return true;
}

void ServerPanel::save() const {
  QSettings settings;
  settings.setValue("server/url", url_->text().trimmed());
  settings.setValue("server/model", model_->text().trimmed());
  settings.setValue("server/insecure", insecure_->isChecked());
  settings.setValue("server/rememberKey", remember_key_->isChecked());
  if (remember_key_->isChecked()) {
    settings.setValue("server/apiKey", key_->text());
  } else {
    settings.remove("server/apiKey");
  }
}

}  // namespace specula::ui
