// The SVG chart module: well-formed XML (balanced tags, escaped text), every
// series named in the legend, points placed by the axes' ranges.
#include "bench/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>

namespace deltafin::bench {
namespace {

// True if every element is closed in order ("<a>...</a>", "<b/>"); no
// stray '<' or '&' in text (both would break an XML parser).
bool balanced(const std::string& s, std::string* why) {
  std::vector<std::string> stack;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '&') {
      const size_t semi = s.find(';', i);
      const std::string ent = s.substr(i, semi == std::string::npos ? 8 : semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;") return *why = "bad entity " + ent, false;
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      ++i;
      continue;
    }
    const size_t end = s.find('>', i);
    if (end == std::string::npos) return *why = "unterminated tag", false;
    std::string tag = s.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return *why = "'<' inside a tag", false;
    i = end + 1;
    if (tag.empty()) return *why = "empty tag", false;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name) return *why = "mismatched </" + name + ">", false;
      stack.pop_back();
    } else if (tag.back() != '/') {
      stack.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
  }
  if (!stack.empty()) return *why = "unclosed <" + stack.back() + ">", false;
  return true;
}

Chart sample(bool bars) {
  Chart c;
  c.title = "speed-up <vs> drives & more";
  c.xlabel = "drives";
  c.ylabel = "speed-up";
  c.bars = bars;
  c.series = {{"simulated \"k3\"", {{1, 1}, {2, 1.9}, {3, 2.7}, {4, 3.4}}},
              {"ideal", {{1, 1}, {2, 2}, {3, 3}, {4, 4}}}};
  return c;
}

TEST(SvgChart, LinesAreWellFormedAndNameEverySeries) {
  const std::string svg = render_svg(sample(false));
  std::string why;
  EXPECT_TRUE(balanced(svg, &why)) << why << "\n" << svg;
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("simulated &quot;k3&quot;"), std::string::npos);
  EXPECT_NE(svg.find(">ideal</text>"), std::string::npos);
  EXPECT_NE(svg.find("speed-up &lt;vs&gt; drives &amp; more"), std::string::npos);
  // One polyline per series, one marker per point.
  const auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = svg.find(what); at != std::string::npos; at = svg.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<polyline"), 2u);
  EXPECT_EQ(count("<circle"), 8u);
  // The y ticks run 0..4 (nice steps of 1); the ideal line's (4, 4) sits at the top-right corner of the plot.
  EXPECT_NE(svg.find(">4</text>"), std::string::npos);
  const size_t ideal = svg.find("data-name=\"ideal\"");
  ASSERT_NE(ideal, std::string::npos);
  const size_t from = svg.find("points=\"", ideal) + 8;
  const std::string pts = svg.substr(from, svg.find('"', from) - from);
  EXPECT_NE(pts.find("624.0,36.0"), std::string::npos) << pts;  // x: 64 + 560, y: top 36
}

TEST(SvgChart, BarsAndEmptyChartsAreWellFormed) {
  std::string why;
  const std::string bars = render_svg(sample(true));
  EXPECT_TRUE(balanced(bars, &why)) << why;
  size_t rects = 0;
  for (size_t at = bars.find("<rect x="); at != std::string::npos; at = bars.find("<rect x=", at + 1)) ++rects;
  EXPECT_EQ(rects, 8u + 2u);  // 2 series x 4 bars + 2 legend swatches
  Chart empty;
  empty.title = "nothing";
  const std::string e = render_svg(empty);
  EXPECT_TRUE(balanced(e, &why)) << why;
  EXPECT_NE(e.find("no data"), std::string::npos);
  Chart nan = sample(false);
  nan.series[0].points.push_back({5, std::nan("")});  // skipped, never printed as "nan"
  const std::string n = render_svg(nan);
  EXPECT_TRUE(balanced(n, &why)) << why;
  EXPECT_EQ(n.find("nan"), std::string::npos);
}

TEST(SvgChart, NiceTicks) {
  EXPECT_EQ(nice_ticks(0, 3.7), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(nice_ticks(0, 100), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  const auto t = nice_ticks(1, 1);  // degenerate range still gives an axis
  EXPECT_GE(t.size(), 2u);
}

}  // namespace
}  // namespace deltafin::bench
