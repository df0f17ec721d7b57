// A small live chart of the run: generated tokens per second and draft acceptance (%)
// against elapsed seconds, fed by the worker's statistics.
#pragma once

#include <QtCharts/QChartView>

#include "run_types.h"

class QLineSeries;
class QValueAxis;

namespace specula::ui {

class ThroughputChart : public QChartView {
  Q_OBJECT

 public:
  explicit ThroughputChart(QWidget* parent = nullptr);

  void reset();
  void addPoint(const RunStats& stats);
  int points() const;

 private:
  QLineSeries* throughput_;
  QLineSeries* acceptance_;
  QValueAxis* time_axis_;
  QValueAxis* throughput_axis_;
  QValueAxis* acceptance_axis_;
};

}  // namespace specula::ui
