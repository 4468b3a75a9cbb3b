#include "bench/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace deltafin::bench {

namespace {

constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                    "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Short tick label: integers plainly, else up to 3 significant digits.
std::string label(double v) {
  if (std::fabs(v) < 1e-12) return "0";
  if (std::fabs(v - std::round(v)) < 1e-9 && std::fabs(v) < 1e9) return fmt::format("{}", (long long)std::llround(v));
  return fmt::format("{:.3g}", v);
}

bool finite(const std::pair<double, double>& p) { return std::isfinite(p.first) && std::isfinite(p.second); }

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag * (1 + 1e-9)) {
      step = m * mag;
      break;
    }
  // From the last tick at or below lo to the first at or above hi.
  const long long i0 = (long long)std::floor(lo / step + 1e-9),
                  i1 = std::max(i0 + 1, (long long)std::ceil(hi / step - 1e-9));
  std::vector<double> t;
  for (long long i = i0; i <= i1; ++i) t.push_back(double(i) * step);
  return t;
}

std::string render_svg(const Chart& c) {
  const double W = std::max(c.width, 200), H = std::max(c.height, 150);
  const double left = 64, right = 16, top = c.title.empty() ? 16 : 36, bottom = 48;
  const double pw = W - left - right, ph = H - top - bottom;

  // Data ranges; y always includes 0 for bars.
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  std::vector<double> xs;  // distinct x values, for bar groups
  for (const auto& s : c.series)
    for (const auto& p : s.points) {
      if (!finite(p)) continue;
      x0 = std::min(x0, p.first), x1 = std::max(x1, p.first);
      y0 = std::min(y0, p.second), y1 = std::max(y1, p.second);
      xs.push_back(p.first);
    }
  const bool empty = xs.empty();
  if (empty) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  if (c.bars || y0 > 0) y0 = std::min(y0, 0.0);
  const std::vector<double> yt = nice_ticks(y0, y1);
  const double ylo = yt.front(), yhi = yt.back();
  std::vector<double> xt;
  double xlo = x0, xhi = x1;
  if (c.bars) {
    xt = xs;
  } else {
    xt = nice_ticks(x0, x1);
    xlo = xt.front(), xhi = xt.back();
  }
  const size_t groups = std::max<size_t>(xs.size(), 1);
  auto X = [&](double x) { return left + (xhi > xlo ? (x - xlo) / (xhi - xlo) : 0.5) * pw; };
  auto Y = [&](double y) { return top + ph - (y - ylo) / (yhi - ylo) * ph; };
  auto group_centre = [&](double x) {
    const size_t i = size_t(std::lower_bound(xs.begin(), xs.end(), x) - xs.begin());
    return left + (double(i) + 0.5) / double(groups) * pw;
  };

  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      W, H);
  if (!c.title.empty())
    o += fmt::format("<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n", W / 2,
                     escape(c.title));
  // Grid and y ticks.
  for (double v : yt)
    o += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>\n"
        "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        left, Y(v), left + pw, left - 6, Y(v) + 4, label(v));
  // x ticks.
  for (double v : xt) {
    const double px = c.bars ? group_centre(v) : X(v);
    o += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#333\"/>\n"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
        px, top + ph, top + ph + 5, top + ph + 18, label(v));
  }
  // Axes and labels.
  o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#333\"/>\n", left, top,
                   top + ph);
  o += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#333\"/>\n", left,
                   top + ph, left + pw);
  if (!c.xlabel.empty())
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", left + pw / 2, H - 8,
                     escape(c.xlabel));
  if (!c.ylabel.empty())
    o += fmt::format(
        "<text x=\"14\" y=\"{0:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {0:.1f})\">{1}</text>\n",
        top + ph / 2, escape(c.ylabel));
  if (empty)
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#888\">no data</text>\n",
                     left + pw / 2, top + ph / 2);

  // Data.
  const size_t ns = std::max<size_t>(c.series.size(), 1);
  for (size_t si = 0; si < c.series.size(); ++si) {
    const Series& s = c.series[si];
    const char* colour = kColours[si % std::size(kColours)];
    o += fmt::format("<g class=\"series\" data-name=\"{}\">\n", escape(s.name));
    if (c.bars) {
      const double slot = pw / double(groups), bw = slot * 0.8 / double(ns);
      for (const auto& p : s.points) {
        if (!finite(p)) continue;
        const double bx = group_centre(p.first) - slot * 0.4 + bw * double(si);
        const double ya = Y(std::max(p.second, 0.0)), yb = Y(std::min(p.second, 0.0));
        o += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{}: "
            "{}</title></rect>\n",
            bx, ya, bw, yb - ya, colour, escape(s.name), label(p.second));
      }
    } else {
      std::string pts;
      for (const auto& p : s.points)
        if (finite(p)) pts += fmt::format("{}{:.1f},{:.1f}", pts.empty() ? "" : " ", X(p.first), Y(p.second));
      if (!pts.empty())
        o += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", colour, pts);
      for (const auto& p : s.points)
        if (finite(p))
          o += fmt::format(
              "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{}: ({}, {})</title></circle>\n",
              X(p.first), Y(p.second), colour, escape(s.name), label(p.first), label(p.second));
    }
    o += "</g>\n";
  }
  // Legend, top left inside the plot.
  for (size_t si = 0; si < c.series.size(); ++si) {
    const double ly = top + 8 + 18 * double(si);
    o += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n"
        "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
        left + 10, ly, kColours[si % std::size(kColours)], left + 28, ly + 10, escape(c.series[si].name));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace deltafin::bench
