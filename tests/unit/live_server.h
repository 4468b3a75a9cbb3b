// An in-process `deltafin serve` on the tiny test model and a free loopback
// port, serving on its own thread until destroyed; its request log is kept
// for assertions.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/server.h"
#include "test_models.h"

namespace deltafin::testing {

class LiveServer {
 public:
  explicit LiveServer(server::ServerOptions so = {}, server::EngineOptions eo = {}, int seed = 11) {
    auto m = Model::open(tiny_model(seed), 1);
    EXPECT_TRUE(m.ok()) << m.message();
    auto e = server::Engine::create(std::move(m).value(), tiny_model(seed), eo);
    EXPECT_TRUE(e.ok()) << e.message();
    engine_ = std::move(e).value();
    so.port = 0;
    so.log = [this](const std::string& line) {
      std::lock_guard lock(mu_);
      log_.push_back(line);
    };
    srv_ = std::make_unique<server::Server>(*engine_, so);
    Status s = srv_->bind();
    EXPECT_TRUE(s.ok()) << s.message();
    thread_ = std::thread([this] { EXPECT_TRUE(srv_->serve().ok()); });
  }
  ~LiveServer() {
    srv_->stop();
    thread_.join();
  }
  int port() const { return srv_->port(); }
  server::Server& server() { return *srv_; }
  std::vector<std::string> log() {
    std::lock_guard lock(mu_);
    return log_;
  }
  // A counter or gauge from /metrics (the first line starting with `name`), or -1.
  double metric(const std::string& name) {
    const std::string text = srv_->metrics_text();
    size_t pos = 0;
    while ((pos = text.find(name, pos)) != std::string::npos) {
      const bool line_start = pos == 0 || text[pos - 1] == '\n';
      const size_t after = pos + name.size();
      if (line_start && after < text.size() && (text[after] == ' ' || text[after] == '{')) {
        const size_t sp = text.find(' ', text[after] == '{' ? text.find('}', after) : after);
        return std::strtod(text.c_str() + sp + 1, nullptr);
      }
      pos = after;
    }
    return -1;
  }

 private:
  std::unique_ptr<server::Engine> engine_;
  std::unique_ptr<server::Server> srv_;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> log_;
};

}  // namespace deltafin::testing
