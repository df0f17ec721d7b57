#include "throughput_chart.h"

#include <QtCharts/QBarCategoryAxis>
#include <QtCharts/QBarSeries>
#include <QtCharts/QBarSet>
#include <QtCharts/QLineSeries>
#include <QtCharts/QValueAxis>
#include <algorithm>

namespace specula::ui {

ThroughputChart::ThroughputChart(QWidget* parent)
    : QChartView(parent),
      tokens_(new QBarSet(tr("tokens"))),
      acceptance_(new QLineSeries),
      candidate_axis_(new QBarCategoryAxis),
      tokens_axis_(new QValueAxis),
      acceptance_axis_(new QValueAxis) {
  setObjectName("throughputChart");
  auto* chart = new QChart;
  chart->setMargins(QMargins(2, 2, 2, 2));
  chart->legend()->setAlignment(Qt::AlignRight);
  auto* bars = new QBarSeries;
  bars->append(tokens_);
  acceptance_->setName(tr("acceptance %"));
  acceptance_->setPointsVisible(true);
  chart->addSeries(bars);
  chart->addSeries(acceptance_);
  tokens_axis_->setLabelFormat("%.0f");
  acceptance_axis_->setRange(0, 100);
  acceptance_axis_->setLabelFormat("%.0f");
  chart->addAxis(candidate_axis_, Qt::AlignBottom);
  chart->addAxis(tokens_axis_, Qt::AlignLeft);
  chart->addAxis(acceptance_axis_, Qt::AlignRight);
  bars->attachAxis(candidate_axis_);
  bars->attachAxis(tokens_axis_);
  acceptance_->attachAxis(candidate_axis_);
  acceptance_->attachAxis(acceptance_axis_);
  chart->setTheme(palette().color(QPalette::Window).lightness() < 128 ? QChart::ChartThemeDark
                                                                        : QChart::ChartThemeLight);
  chart->setBackgroundRoundness(0);
  setChart(chart);
  setRenderHint(QPainter::Antialiasing);
  setMinimumHeight(130);
  setMaximumHeight(170);
  setFocusPolicy(Qt::NoFocus);
  reset(0);
}

void ThroughputChart::reset(int candidates) {
  tokens_->remove(0, tokens_->count());
  acceptance_->clear();
  QStringList names;
  for (int i = 0; i < candidates; ++i) {
    names << QStringLiteral("#%1").arg(i + 1);
    tokens_->append(0.0);
    acceptance_->append(i, 0.0);
  }
  candidate_axis_->clear();
  candidate_axis_->append(names);
  // whole numbers at each of the axis's five ticks: 0 to 1 read "1, 1, 1, 0, 0" in whole tokens
  tokens_axis_->setRange(0, tokens_axis_->tickCount() - 1);
  chart()->setTitle({});
}

void ThroughputChart::setCandidate(int index, int tokens, int accepted, int proposed) {
  if (index < 0 || index >= candidates()) return;
  if (tokens_->at(index) != tokens) tokens_->replace(index, tokens);
  const double percent = proposed > 0 ? 100.0 * accepted / proposed : 0.0;
  if (acceptance_->at(index).y() != percent) acceptance_->replace(index, QPointF(index, percent));
  if (tokens > tokens_axis_->max()) {
    tokens_axis_->setRange(0, tokens * 1.15);
    tokens_axis_->applyNiceNumbers();
  }
}

void ThroughputChart::setStats(const RunStats& stats) {
  chart()->setTitle(tr("%1 tokens in %2 s, %3 tok/s")
                        .arg(stats.tokens)
                        .arg(stats.elapsedSeconds, 0, 'f', stats.elapsedSeconds < 10 ? 2 : 1)
                        .arg(stats.tokensPerSecond, 0, 'f', 0));
}

int ThroughputChart::candidates() const { return int(tokens_->count()); }

double ThroughputChart::tokens(int index) const { return tokens_->at(index); }

double ThroughputChart::acceptance(int index) const { return acceptance_->at(index).y(); }

}  // namespace specula::ui
