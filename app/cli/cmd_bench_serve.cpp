// specula-cli bench-serve: requests per second and time to first token of an
// OpenAI-compatible server (Specula's serve or any other), for each number of candidates.
//
// For every n it sends --requests requests of n candidates each, --concurrency at a time
// (one remote generator per client, as separate users would), and reports the requests per
// second over the whole run, the median time from sending a request to its first text, the
// median time to its end, and generated tokens per second. A benchmark, not a test: the
// figures are the server's machine's, under whatever load it has.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "model_options.h"
#include "serve/remote_generator.h"
#include "common/statistics.h"

namespace specula::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchServeArgs {
  serve::RemoteOptions remote;
  std::vector<int> candidates{1, 8};
  int requests = 16;
  int concurrency = 4;
  int max_tokens = 64;
  float temperature = 0.8f;
  std::string prompt = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n";
  bool json = false;
};

struct Timing {
  double first_text_s = 0;  // from sending to the first text of any candidate
  double total_s = 0;       // from sending to the end
  int tokens = 0;
};

struct Row {
  int n = 0;
  double wall_s = 0, requests_per_s = 0, median_first_text_ms = 0, median_total_ms = 0, tokens_per_s = 0;
};

Timing one_request(serve::RemoteGenerator& generator, const GenerationRequest& request) {
  const auto start = Clock::now();
  const auto since = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  Timing t;
  SessionCallbacks callbacks;
  callbacks.on_delta = [&](const CandidateDelta&) {
    if (t.first_text_s == 0) t.first_text_s = since();
  };
  const SessionResult r = generator.generate(request, callbacks);
  t.total_s = since();
  t.tokens = r.totals.generated_tokens;
  return t;
}

Row measure(const BenchServeArgs& a, int n) {
  GenerationRequest request;
  request.prompt = a.prompt;
  request.n_candidates = n;
  request.max_new_tokens = a.max_tokens;
  request.sampling.temperature = a.temperature;
  std::atomic<int> next{0};
  std::mutex mutex;
  std::vector<Timing> timings;
  std::string failure;
  const auto start = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < a.concurrency; ++c) {
    clients.emplace_back([&] {
      serve::RemoteGenerator generator(a.remote);
      for (int i = next++; i < a.requests; i = next++) {
        GenerationRequest r = request;
        r.sampling.seed = static_cast<uint64_t>(i) * 1000;
        try {
          const Timing t = one_request(generator, r);
          std::lock_guard lock(mutex);
          timings.push_back(t);
        } catch (const std::exception& e) {
          std::lock_guard lock(mutex);
          failure = e.what();
        }
      }
    });
  }
  for (auto& t : clients) t.join();
  if (!failure.empty()) throw CommandFailed(failure, kExitRemote);
  Row row;
  row.n = n;
  row.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  row.requests_per_s = a.requests / row.wall_s;
  std::vector<double> first, total;
  long tokens = 0;
  for (const Timing& t : timings) {
    first.push_back(1000 * t.first_text_s);
    total.push_back(1000 * t.total_s);
    tokens += t.tokens;
  }
  row.median_first_text_ms = median(first);
  row.median_total_ms = median(total);
  row.tokens_per_s = tokens / row.wall_s;
  return row;
}

void run(const BenchServeArgs& a) {
  if (a.remote.url.empty()) throw CommandFailed("--remote names the server to measure", 2);
  try {
    serve::RemoteGenerator(a.remote).probe();  // fails early with a clear message
  } catch (const serve::RemoteError& e) {
    throw CommandFailed(e.what(), kExitRemote);
  } catch (const std::invalid_argument& e) {
    throw CommandFailed(e.what(), 2);
  }
  std::vector<Row> rows;
  for (int n : a.candidates) rows.push_back(measure(a, n));
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) {
      out.push_back({{"n", r.n},
                     {"requests", a.requests},
                     {"concurrency", a.concurrency},
                     {"wall_s", r.wall_s},
                     {"requests_per_s", r.requests_per_s},
                     {"median_first_text_ms", r.median_first_text_ms},
                     {"median_total_ms", r.median_total_ms},
                     {"tokens_per_s", r.tokens_per_s}});
    }
    std::puts(out.dump(2).c_str());
    return;
  }
  std::printf("%4s %9s %12s %18s %16s %10s\n", "n", "requests", "requests/s", "first text ms", "total ms", "tokens/s");
  for (const Row& r : rows) {
    std::printf("%4d %9d %12.2f %18.1f %16.1f %10.1f\n", r.n, a.requests, r.requests_per_s, r.median_first_text_ms,
                r.median_total_ms, r.tokens_per_s);
  }
  std::printf("(%d at a time, up to %d tokens per candidate, T = %.2f; medians)\n", a.concurrency, a.max_tokens,
              a.temperature);
}

}  // namespace

void add_bench_serve_command(CLI::App& app) {
  auto a = std::make_shared<BenchServeArgs>();
  CLI::App* cmd = app.add_subcommand("bench-serve", "Measure an OpenAI-compatible server: requests/s and time to first text");
  add_remote_options(cmd, a->remote);
  cmd->add_option("--n", a->candidates, "Candidates per request, one measurement each (default 1 8)");
  cmd->add_option("--requests", a->requests, "Requests per measurement (default 16)")->check(CLI::PositiveNumber);
  cmd->add_option("--concurrency", a->concurrency, "Requests at a time (default 4)")->check(CLI::PositiveNumber);
  cmd->add_option("--max-tokens", a->max_tokens, "New tokens per candidate at most (default 64)")->check(CLI::PositiveNumber);
  cmd->add_option("--temp", a->temperature, "Temperature (default 0.8)")->check(CLI::Range(0.0f, 2.0f));
  cmd->add_option("-p,--prompt", a->prompt, "Prompt of every request");
  cmd->add_flag("--json", a->json, "Print the measurements as JSON");
  cmd->callback([a] { run(*a); });
}

}  // namespace specula::cli
