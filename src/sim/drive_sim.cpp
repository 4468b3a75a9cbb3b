#include "sim/drive_sim.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

namespace deltafin::sim {

namespace {

// The whole of `s` as a finite number, or nothing.
std::optional<double> parse_number(const std::string& s) {
  if (s.empty() || s.find_first_of(" \t\n") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno || end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

Result<DriveModel> parse_drive_model(const std::string& text) {
  std::vector<std::string> f;
  size_t at = 0;
  for (;;) {
    const size_t colon = text.find(':', at);
    f.push_back(text.substr(at, colon == std::string::npos ? std::string::npos : colon - at));
    if (colon == std::string::npos) break;
    at = colon + 1;
  }
  if (f.size() > 4) return error("--drive '{}': expected BW_MBps[:LATENCY_US[:QUEUE_DEPTH[:REQUEST_MBps]]]", text);
  DriveModel m;
  const auto bw = parse_number(f[0]);
  if (!bw || *bw <= 0) return error("--drive '{}': bandwidth '{}' is not a positive number of MB/s", text, f[0]);
  m.mb_s = *bw;
  if (f.size() > 1) {
    const auto lat = parse_number(f[1]);
    if (!lat || *lat < 0) return error("--drive '{}': latency '{}' is not a number of microseconds >= 0", text, f[1]);
    m.latency_us = *lat;
  }
  if (f.size() > 2) {
    const auto qd = parse_number(f[2]);
    if (!qd || *qd < 1 || *qd > 4096 || *qd != std::floor(*qd))
      return error("--drive '{}': queue depth '{}' is not an integer in 1..4096", text, f[2]);
    m.queue_depth = int(*qd);
  }
  if (f.size() > 3) {
    const auto req = parse_number(f[3]);
    if (!req || *req < 0) return error("--drive '{}': request rate '{}' is not a number of MB/s >= 0", text, f[3]);
    m.request_mb_s = *req;
  }
  return m;
}

Result<DriveSim> DriveSim::create(const SimOptions& opts) {
  if (opts.drives.empty()) return error("simulator: no drives");
  if (!opts.rate_estimates_mb_s.empty() && opts.rate_estimates_mb_s.size() != opts.drives.size())
    return error("simulator: {} rate estimates for {} drives", opts.rate_estimates_mb_s.size(), opts.drives.size());
  if (!(opts.link_mb_s >= 0) || !std::isfinite(opts.link_mb_s))
    return error("simulator: the link rate must be >= 0 MB/s");
  DriveSim s;
  s.opts_ = opts;
  for (size_t i = 0; i < opts.drives.size(); ++i) {
    const DriveModel& m = opts.drives[i];
    if (!(m.mb_s > 0) || !std::isfinite(m.mb_s)) return error("simulator: drive {}: bandwidth must be > 0 MB/s", i);
    if (!(m.latency_us >= 0) || !std::isfinite(m.latency_us))
      return error("simulator: drive {}: latency must be >= 0 us", i);
    if (m.queue_depth < 1) return error("simulator: drive {}: queue depth must be >= 1", i);
    if (!(m.request_mb_s >= 0) || !std::isfinite(m.request_mb_s))
      return error("simulator: drive {}: the per-request rate must be >= 0 MB/s", i);
    Drive& d = s.drives_.emplace_back();
    d.model = m;
    d.depth = m.queue_depth;
    d.est.rate = (opts.rate_estimates_mb_s.empty() ? m.mb_s : std::max(opts.rate_estimates_mb_s[i], 1.0)) * 1e6;
  }
  return s;
}

void DriveSim::enqueue(int drive, Piece p) {
  Drive& d = drives_[drive];
  d.queued[int(p.purpose)].push_back(p);
  admit(d);  // a drive with a free slot starts the read at once
}

void DriveSim::admit(Drive& d) {
  while (auto p = io::admit_next({d.depth, opts_.prefetch_depth, d.inflight[0], d.inflight[1], !d.queued[0].empty(),
                                  !d.queued[1].empty()})) {
    Piece c = d.queued[int(*p)].front();
    d.queued[int(*p)].pop_front();
    if (d.inflight[0] + d.inflight[1] == 0) d.busy_since = now_;
    d.inflight[int(*p)]++;
    d.inflight_bytes += c.length;
    c.transfer_from = now_ + d.model.latency_us * 1e-6;
    d.serving.push_back(c);
  }
}

void DriveSim::complete(Drive& d, const Piece& p) {
  d.inflight[int(p.purpose)]--;
  d.inflight_bytes -= p.length;
  d.st.bytes += p.length;
  d.st.reads++;
  if (d.inflight[0] + d.inflight[1] == 0) d.st.busy_seconds += now_ - d.busy_since, d.busy_since = now_;
  const double busy = d.st.busy_seconds + (d.inflight[0] + d.inflight[1] ? now_ - d.busy_since : 0);
  d.est.observe(busy, d.st.bytes);
  if (--pending_[p.job] == 0) open_jobs_--;
}

void DriveSim::step() {
  // Each transferring request's rate: its drive's bandwidth, scaled down by the
  // shared link if need be, split equally among the drive's transfers, and
  // at most the drive's per-request rate.
  std::vector<int> transferring(drives_.size(), 0);
  std::vector<double> want(drives_.size(), 0);  // bytes/s the drive's transfers can take together
  double demand = 0;
  for (size_t i = 0; i < drives_.size(); ++i) {
    for (const Piece& p : drives_[i].serving) transferring[i] += p.transfer_from <= now_;
    if (!transferring[i]) continue;
    want[i] = drives_[i].model.mb_s * 1e6;
    if (drives_[i].model.request_mb_s > 0) want[i] = std::min(want[i], transferring[i] * drives_[i].model.request_mb_s * 1e6);
    demand += want[i];
  }
  const double link = opts_.link_mb_s * 1e6;
  const double scale = link > 0 && demand > link ? link / demand : 1.0;
  std::vector<double> rate(drives_.size(), 0);
  double next = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < drives_.size(); ++i) {
    if (transferring[i]) rate[i] = want[i] * scale / transferring[i];
    for (const Piece& p : drives_[i].serving)
      next = std::min(next, p.transfer_from > now_ ? p.transfer_from : now_ + p.remaining / rate[i]);
  }
  const double t0 = now_;
  now_ = next;
  for (size_t i = 0; i < drives_.size(); ++i) {
    Drive& d = drives_[i];
    std::vector<Piece> done;
    for (size_t k = 0; k < d.serving.size();) {
      Piece& p = d.serving[k];
      if (p.transfer_from <= t0) {  // transferring during this step
        const bool finished = t0 + p.remaining / rate[i] <= now_;
        p.remaining -= rate[i] * (now_ - t0);
        if (finished || p.remaining <= 1e-3) {  // 1e-3: rounding of the byte count
          done.push_back(p);
          d.serving.erase(d.serving.begin() + std::ptrdiff_t(k));
          continue;
        }
      }
      ++k;
    }
    for (const Piece& p : done) complete(d, p);
    if (!done.empty()) admit(d);
  }
}

Status DriveSim::run_batch(std::span<const SimRead> reads) {
  pending_.assign(reads.size(), 0);
  open_jobs_ = 0;
  for (size_t j = 0; j < reads.size(); ++j) {
    const SimRead& r = reads[j];
    if (r.span == 0) return error("simulator: read {} has no bytes", j);
    if (r.drives.empty()) return error("simulator: read {} names no drive", j);
    for (int dr : r.drives)
      if (dr < 0 || size_t(dr) >= drives_.size())
        return error("simulator: read {} names drive {} of {}", j, dr, drives_.size());
  }
  // The engine's submit_batch plan: split reads water-filled first, then the
  // whole reads' replicas chosen together.
  std::vector<io::ReplicaLoad> loads;
  for (const Drive& d : drives_) loads.push_back({d.inflight_bytes, d.est.rate});
  std::vector<io::BatchRead> batch;
  for (const SimRead& r : reads) batch.push_back({r.drives, r.span});
  const auto plan = io::plan_batch(batch, loads, opts_.split_min);
  for (size_t j = 0; j < reads.size(); ++j) {
    const SimRead& r = reads[j];
    open_jobs_++;
    pending_[j] = int(plan[j].size());
    split_reads_ += io::should_split(r.drives.size(), r.span, opts_.split_min);
    for (const auto& pc : plan[j])
      enqueue(r.drives[pc.replica], Piece{int(j), r.purpose, pc.length, double(pc.length), 0});
  }
  while (open_jobs_ > 0) step();
  return {};
}

void DriveSim::idle(double seconds) {
  if (seconds > 0) now_ += seconds;
}

std::vector<SimDriveStats> DriveSim::stats() const {
  std::vector<SimDriveStats> out;
  for (const Drive& d : drives_) {
    SimDriveStats s = d.st;
    s.rate_estimate_mb_s = d.est.rate / 1e6;
    out.push_back(s);
  }
  return out;
}

}  // namespace deltafin::sim
