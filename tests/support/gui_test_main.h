// main() of a QtTest suite that drives a real window: the settings and autosave of the run
// go to a private directory, so that suites never see each other's or the user's.
#pragma once

#include <QApplication>
#include <QTemporaryDir>
#include <QtTest>

#define SPECULA_GUI_TEST_MAIN(TestClass, application_name)                 \
  int main(int argc, char** argv) {                                        \
    QTemporaryDir home;                                                    \
    qputenv("XDG_CONFIG_HOME", (home.path() + "/config").toLocal8Bit());   \
    qputenv("XDG_DATA_HOME", (home.path() + "/data").toLocal8Bit());       \
    QApplication app(argc, argv);                                          \
    QCoreApplication::setOrganizationName("SpeculaTest");                  \
    QCoreApplication::setApplicationName(application_name);                \
    TestClass test;                                                        \
    return QTest::qExec(&test, argc, argv);                                \
  }
