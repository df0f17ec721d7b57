#include "throughput_chart.h"

#include <QtCharts/QLineSeries>
#include <QtCharts/QValueAxis>
#include <algorithm>

namespace specula::ui {

ThroughputChart::ThroughputChart(QWidget* parent)
    : QChartView(parent),
      throughput_(new QLineSeries),
      acceptance_(new QLineSeries),
      time_axis_(new QValueAxis),
      throughput_axis_(new QValueAxis),
      acceptance_axis_(new QValueAxis) {
  setObjectName("throughputChart");
  auto* chart = new QChart;
  chart->setMargins(QMargins(2, 2, 2, 2));
  chart->legend()->setAlignment(Qt::AlignRight);
  throughput_->setName(tr("tok/s"));
  acceptance_->setName(tr("acceptance %"));
  chart->addSeries(throughput_);
  chart->addSeries(acceptance_);
  time_axis_->setTitleText(tr("s"));
  time_axis_->setLabelFormat("%.0f");
  throughput_axis_->setLabelFormat("%.0f");
  acceptance_axis_->setRange(0, 100);
  acceptance_axis_->setLabelFormat("%.0f");
  chart->addAxis(time_axis_, Qt::AlignBottom);
  chart->addAxis(throughput_axis_, Qt::AlignLeft);
  chart->addAxis(acceptance_axis_, Qt::AlignRight);
  throughput_->attachAxis(time_axis_);
  throughput_->attachAxis(throughput_axis_);
  acceptance_->attachAxis(time_axis_);
  acceptance_->attachAxis(acceptance_axis_);
  chart->setTheme(palette().color(QPalette::Window).lightness() < 128 ? QChart::ChartThemeDark
                                                                        : QChart::ChartThemeLight);
  chart->setBackgroundRoundness(0);
  setChart(chart);
  setRenderHint(QPainter::Antialiasing);
  setMinimumHeight(130);
  setMaximumHeight(170);
  setFocusPolicy(Qt::NoFocus);
  reset();
}

void ThroughputChart::reset() {
  throughput_->clear();
  acceptance_->clear();
  time_axis_->setRange(0, 1);
  throughput_axis_->setRange(0, 1);
}

void ThroughputChart::addPoint(const RunStats& stats) {
  throughput_->append(stats.elapsedSeconds, stats.tokensPerSecond);
  acceptance_->append(stats.elapsedSeconds, 100.0 * stats.acceptance);
  time_axis_->setRange(0, std::max(1.0, stats.elapsedSeconds));
  time_axis_->applyNiceNumbers();
  time_axis_->setLabelFormat(time_axis_->max() <= 5 ? "%.1f" : "%.0f");  // short runs tick in tenths
  throughput_axis_->setRange(0, std::max(throughput_axis_->max(), stats.tokensPerSecond * 1.15));
  throughput_axis_->applyNiceNumbers();
}

int ThroughputChart::points() const { return int(throughput_->count()); }

}  // namespace specula::ui
