// A small live chart of the run, per candidate: tokens generated (bars) and draft
// acceptance (%, points), with the run's elapsed time and tokens per second in its title.
// Per candidate rather than against time, so that a run of a fraction of a second (the
// demo pair's usual) shows as much as a long one.
#pragma once

#include <QtCharts/QChartView>

#include "run_types.h"

class QBarCategoryAxis;
class QBarSet;
class QLineSeries;
class QValueAxis;

namespace specula::ui {

class ThroughputChart : public QChartView {
  Q_OBJECT

 public:
  explicit ThroughputChart(QWidget* parent = nullptr);

  void reset(int candidates);
  // Candidate `index` has generated `tokens`; of its proposed draft tokens, `accepted` were kept.
  void setCandidate(int index, int tokens, int accepted, int proposed);
  void setStats(const RunStats& stats);  // the title
  int candidates() const;
  double tokens(int index) const;
  double acceptance(int index) const;  // percent; 0 when nothing was proposed

 private:
  QBarSet* tokens_;
  QLineSeries* acceptance_;
  QBarCategoryAxis* candidate_axis_;
  QValueAxis* tokens_axis_;
  QValueAxis* acceptance_axis_;
};

}  // namespace specula::ui
