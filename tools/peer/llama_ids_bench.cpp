// llama.cpp on given token ids, for the side-by-side benchmark (docs/guide/benchmarking.md,
// "Side by side with llama.cpp"). Built OUTSIDE this repository's build, against
// a llama.cpp tree built outside it (never a dependency of Deltafin):
//
//   g++ -O2 -std=c++17 tools/peer/llama_ids_bench.cpp -I LLAMA/include -I LLAMA/ggml/include \
//       -L LLAMA/build/bin -lllama -lggml -lggml-base -Wl,-rpath,LLAMA/build/bin -o /tmp/llama_ids_bench
//
// Why not llama-bench or llama-completion: llama-bench always repacks MXFP4
// weights into a RAM copy (right in RAM, wrong for a model larger than RAM,
// where llama.cpp's best setting is mmap without repacking), and
// llama-completion takes text, not the prompt ids the Deltafin arms use.
//
// Usage: llama_ids_bench MODEL.gguf THREADS IDS N_GEN [repack 0|1]
//   IDS: comma-separated prompt token ids. Greedy; prints one line:
//   load_s, ttft_s (prompt decode + first token), decode tok/s over the
//   N_GEN - 1 tokens after the first, and the generated ids.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s MODEL.gguf THREADS IDS N_GEN [repack 0|1]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[2]);
  std::vector<llama_token> prompt;
  std::stringstream ss(argv[3]);
  for (std::string t; std::getline(ss, t, ',');) prompt.push_back(llama_token(std::atoi(t.c_str())));
  const int n_gen = std::atoi(argv[4]);
  const bool repack = argc > 5 && std::atoi(argv[5]) != 0;
  if (prompt.empty() || n_gen < 1 || threads < 1) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.load_mode = LLAMA_LOAD_MODE_MMAP;
  mp.use_extra_bufts = repack;
  const double t0 = now();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "%s: cannot load\n", argv[1]);
    return 1;
  }
  const double t1 = now();
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(prompt.size() + size_t(n_gen) + 16);
  cp.n_batch = uint32_t(prompt.size());
  cp.n_ubatch = uint32_t(prompt.size() < 512 ? prompt.size() : 512);
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "cannot create a context\n");
    return 1;
  }
  llama_sampler* greedy = llama_sampler_init_greedy();
  const double t2 = now();
  if (llama_decode(ctx, llama_batch_get_one(prompt.data(), int32_t(prompt.size()))) != 0) {
    std::fprintf(stderr, "prompt decode failed\n");
    return 1;
  }
  llama_token tok = llama_sampler_sample(greedy, ctx, -1);
  const double t3 = now();
  std::vector<llama_token> out{tok};
  for (int i = 1; i < n_gen; ++i) {
    if (llama_decode(ctx, llama_batch_get_one(&tok, 1)) != 0) {
      std::fprintf(stderr, "decode failed at token %d\n", i);
      return 1;
    }
    tok = llama_sampler_sample(greedy, ctx, -1);
    out.push_back(tok);
  }
  const double t4 = now();
  std::string ids;
  for (llama_token t : out) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  std::printf("llama.cpp prompt %zu tokens: load_s %.3f ttft_s %.3f decode_tok_s %.3f (%d tokens in %.3f s) ids %s\n",
              prompt.size(), t1 - t0, t3 - t2, n_gen > 1 ? double(n_gen - 1) / (t4 - t3) : 0.0, n_gen - 1, t4 - t3,
              ids.c_str());
  llama_sampler_free(greedy);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
