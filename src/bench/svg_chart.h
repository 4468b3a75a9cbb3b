// A small, dependency-free SVG chart: x/y axes with "nice" ticks, a legend,
// and either lines with markers or grouped bars (one group per distinct x).
// For benchmark and simulator reports (e.g. `simulate-drives --svg`).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace deltafin::bench {

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite points are skipped
};

struct Chart {
  std::string title, xlabel, ylabel;
  std::vector<Series> series;
  bool bars = false;  // grouped bars at each distinct x instead of lines
  int width = 640, height = 400;
};

// A complete SVG document (text escaped). An empty chart still has its axes.
std::string render_svg(const Chart& chart);

// Tick values covering [lo, hi]: about `target` steps of 1, 2 or 5 x 10^k.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

}  // namespace deltafin::bench
