// `specula-cli serve` as editor plugins use it, over real HTTP on loopback, on the demo pair:
// llama.vim's request for a hole in a Python function replayed field for field against
// POST /infill, every field the plugin reads present with its type, the prompt in the demo
// pair's FIM layout; the same text twice at T = 0; the demo target without its FIM tokens
// (tests/support/demo_without_fim.h): llama.cpp's 501 and the API key asked for, and with
// --infill-fallback the prefix alone, cut at a dedent; t_max_predict_ms and n_indent ending a
// completion early, as a prefix of the completion without them; POST /completion whole and
// streamed, with stop strings, token-id prompts, several completions and llama.cpp's error
// object; and hostile input: invalid UTF-8, a prefix far beyond the context (cut, truncated),
// clients that hang up mid-request; after which nothing failed and no KV block is left held.
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <thread>

#include "decode/generator.h"
#include "model/demo_models.h"
#include "model/tokenizer.h"
#include "serve/llama_api.h"
#include "serve/sse.h"
#include "demo_without_fim.h"
#include "llama_vim.h"
#include "serve_process.h"

using namespace specula;
using namespace specula::serve;
using namespace specula::test;
using nlohmann::json;

namespace {

const char* kJson = "application/json";

int indentation(const std::string& line) {
  int n = 0;
  while (n < int(line.size()) && (line[size_t(n)] == ' ' || line[size_t(n)] == '\t')) ++n;
  return n;
}

// The lines of `text` after its first, without the last when it is whitespace only (what the
// n_indent cut leaves).
QStringList later_lines(const std::string& text) {
  QStringList lines = QString::fromStdString(text).split('\n');
  lines.removeFirst();
  if (!lines.isEmpty() && lines.last().trimmed().isEmpty()) lines.removeLast();
  return lines;
}

bool is_llama_error(const json& body, int code, const char* type) {
  return body.is_object() && body.contains("error") && body["error"]["code"] == code && body["error"]["type"] == type &&
         body["error"]["message"].is_string() && !body["error"]["message"].get<std::string>().empty();
}

}  // namespace

class TestServeEditor : public QObject {
  Q_OBJECT

  std::unique_ptr<ServeProcess> demo;  // the demo pair, FIM tokens and all
  std::unique_ptr<Tokenizer> tokenizer;
  QTemporaryDir dir;
  QString without_fim;  // the demo target without its FIM tokens (demo_without_fim.h)

 private slots:
  void initTestCase() {
    demo = std::make_unique<ServeProcess>(QStringList{"--device", "cpu", "--max-queue", "4"});
    QVERIFY2(demo->started(), qPrintable(demo->errors()));
    const auto pair = find_demo_models(SPECULA_SOURCE_DIR);
    QVERIFY(pair);
    tokenizer = create_tokenizer(load_vocabulary_of(pair->target));
    QVERIFY(tokenizer->fim().complete());
    without_fim = dir.filePath("demo-without-fim.gguf");
    write_demo_target_without_fim(without_fim.toStdString());
  }

  void llamaVimsRequestGetsEveryFieldItReads() {
    int status = 0;
    const json request = llama_vim_request();
    const json r = post_json(demo->port(), "/infill", request, &status);
    QCOMPARE(status, 200);
    // exactly the fields asked for, flattened, with the types llama.vim reads
    QCOMPARE(int(r.size()), int(request["response_fields"].size()));
    QVERIFY2(r["content"].is_string(), r.dump().c_str());
    for (const char* name :
         {"timings/prompt_ms", "timings/prompt_per_token_ms", "timings/prompt_per_second", "timings/predicted_ms",
          "timings/predicted_per_token_ms", "timings/predicted_per_second"}) {
      QVERIFY2(r[name].is_number() && r[name].get<double>() >= 0, name);
    }
    QVERIFY(r["timings/prompt_n"].is_number_integer() && r["timings/prompt_n"].get<int>() > 0);
    QVERIFY(r["timings/predicted_n"].is_number_integer() && r["timings/predicted_n"].get<int>() > 0);
    QVERIFY(r["timings/predicted_n"].get<int>() <= 128);
    QVERIFY(r["truncated"].is_boolean() && !r["truncated"].get<bool>());
    QVERIFY(r["tokens_cached"].is_number_integer());
    QCOMPARE(r["tokens_cached"].get<int>(), 0);  // no prompt cache yet
    // the prompt in the demo pair's FIM layout: BOS, the other file as a snippet (the
    // vocabulary has no file separator), <fim_suffix> suffix <fim_prefix> prefix <fim_middle>
    // (the pair was trained suffix first)
    const LlamaRequest parsed = parse_llama_request(LlamaEndpoint::Infill, request.dump(), 16);
    const InfillPrompt expected = infill_prompt(*tokenizer, parsed, 1 << 20, false);
    QCOMPARE(r["timings/prompt_n"].get<int>(), int(expected.ids.size()));
    const std::vector<int> fim_tail = tokenizer->fim_prompt(kLlamaVimPrefix, kLlamaVimSuffix);
    QVERIFY(std::equal(fim_tail.begin() + 1, fim_tail.end(), expected.ids.end() - int(fim_tail.size()) + 1));
  }

  // The demo pair fills a hole from both sides (tools/train/fim.py): greedy, the body between
  // a docstring and the end of the function, ended by the model itself.
  void demoPairFillsTheHole() {
    const json request = {{"input_prefix", "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n    "},
                          {"input_suffix", "\n"},
                          {"n_predict", 48},
                          {"temperature", 0},
                          {"samplers", {"temperature"}}};
    int status = 0;
    const json r = post_json(demo->port(), "/infill", request, &status);
    QCOMPARE(status, 200);
    QCOMPARE(r["content"].get<std::string>(), std::string("return a + b"));
    QCOMPARE(r["stop_type"].get<std::string>(), std::string("eos"));
  }

  void fallbackCompletesThePrefixAlone() {
    ServeProcess fallback({"--device", "cpu", "-m", without_fim, "--infill-fallback"});
    QVERIFY2(fallback.started(), qPrintable(fallback.errors()));
    int status = 0;
    const json r = post_json(fallback.port(), "/infill", greedy(llama_vim_request()), &status);
    QCOMPARE(status, 200);
    // the fallback's prompt is the prefix alone: its tokens, with BOS
    QCOMPARE(r["timings/prompt_n"].get<int>(), int(tokenizer->encode(kLlamaVimPrefix, true).size()));
    // it ends the completion before a line that dedents below the hole (4), and before one
    // that repeats the line after the hole, which the model did not see
    const std::string content = r["content"].get<std::string>();
    QVERIFY(!content.empty());
    for (const QString& line : later_lines(content)) {
      QVERIFY2(line.trimmed().isEmpty() || indentation(line.toStdString()) >= 4, qPrintable(line));
      QVERIFY2(line != "    return total / len(values)", qPrintable(line));
    }
    QVERIFY2(content.find("\n    return total") == std::string::npos, content.c_str());
  }

  void sameTextTwiceAtTemperatureZero() {
    const json request = greedy(llama_vim_request());
    int status = 0;
    const json first = post_json(demo->port(), "/infill", request, &status);
    QCOMPARE(status, 200);
    const json second = post_json(demo->port(), "/infill", request, &status);
    QCOMPARE(status, 200);
    QVERIFY(!first["content"].get<std::string>().empty());
    QCOMPARE(second["content"], first["content"]);
  }

  void wholeResponseIsLlamaCpps() {
    json request = greedy(llama_vim_request());
    request.erase("response_fields");
    int status = 0;
    const json r = post_json(demo->port(), "/infill", request, &status);
    QCOMPARE(status, 200);
    for (const char* name : {"index", "content", "tokens", "id_slot", "stop", "model", "tokens_predicted",
                             "tokens_evaluated", "generation_settings", "prompt", "has_new_line", "truncated",
                             "stop_type", "stopping_word", "tokens_cached", "timings"}) {
      QVERIFY2(r.contains(name), name);
    }
    QCOMPARE(r["stop"].get<bool>(), true);
    QCOMPARE(r["model"].get<std::string>(), std::string("specula-demo"));
    const std::string stop_type = r["stop_type"].get<std::string>();
    QVERIFY2(stop_type == "eos" || stop_type == "limit", stop_type.c_str());
    // the prompt cache gave what was not computed (the same request came before)
    QCOMPARE(r["tokens_evaluated"].get<int>(), r["timings"]["prompt_n"].get<int>() + r["tokens_cached"].get<int>());
    QCOMPARE(r["tokens_predicted"], r["timings"]["predicted_n"]);
    QCOMPARE(r["generation_settings"]["temperature"].get<double>(), 0.0);
    QCOMPARE(r["generation_settings"]["n_predict"].get<int>(), 128);
    QCOMPARE(r["has_new_line"].get<bool>(), r["content"].get<std::string>().find('\n') != std::string::npos);
    for (const char* name : {"prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n",
                             "predicted_ms", "predicted_per_token_ms", "predicted_per_second"}) {
      QVERIFY2(r["timings"][name].is_number(), name);
    }
  }

  void withoutFimTokensOrFallback501() {
    ServeProcess plain({"--device", "cpu", "-m", without_fim, "--api-key", "s3cret"});
    QVERIFY2(plain.started(), qPrintable(plain.errors()));
    int status = 0;
    // the key is asked for as on /v1/ (llama.vim sends it as a bearer token)
    QVERIFY(is_llama_error(post_json(plain.port(), "/infill", llama_vim_request(), &status), 401, "authentication_error"));
    QCOMPARE(status, 401);
    const json r = post_json(plain.port(), "/infill", llama_vim_request(), &status, {{"Authorization", "Bearer s3cret"}});
    QVERIFY2(status == 501, r.dump().c_str());
    QVERIFY2(is_llama_error(r, 501, "not_supported_error"), r.dump().c_str());
    QCOMPARE(r["error"]["message"].get<std::string>(),
             std::string("Infill is not supported by this model: prefix token is missing. suffix token is missing. "
                         "middle token is missing. "));
    // /completion needs no FIM tokens
    post_json(plain.port(), "/completion", {{"prompt", "def f():\n"}, {"n_predict", 4}}, &status,
         {{"Authorization", "Bearer s3cret"}});
    QCOMPARE(status, 200);
  }

  void timeLimitEndsOnTime() {
    // the same greedy completion of 128 tokens without and with a 1 ms limit: the limited one
    // ends at the first step after the limit (the limit counts from the first token; 128 tokens
    // of code take many lines and far more than 1 ms), a prefix of the other made of its whole
    // lines, or of part of its first line when none has ended yet, and says it stopped at a limit
    json request = {{"prompt", kLlamaVimPrefix}, {"n_predict", 128}, {"temperature", 0}};
    int status = 0;
    const json whole = post_json(demo->port(), "/completion", request, &status);
    QCOMPARE(status, 200);
    request["t_max_predict_ms"] = 1;
    const json limited = post_json(demo->port(), "/completion", request, &status);
    QCOMPARE(status, 200);
    const std::string all = whole["content"].get<std::string>();
    const std::string cut = limited["content"].get<std::string>();
    QVERIFY2(std::count(all.begin(), all.end(), '\n') >= 3, all.c_str());  // lines to cut
    QVERIFY2(all.rfind(cut, 0) == 0, cut.c_str());                         // a prefix of it
    QVERIFY2(cut.size() < all.size(), cut.c_str());
    QVERIFY2(cut.find('\n') == std::string::npos || cut.back() == '\n', cut.c_str());  // whole lines
    QCOMPARE(limited["stop_type"].get<std::string>(), std::string("limit"));
    QVERIFY(limited["timings"]["predicted_n"].get<int>() < whole["timings"]["predicted_n"].get<int>());
  }

  void nIndentEndsALessIndentedLine() {
    json request = greedy(llama_vim_request());
    request.erase("response_fields");
    request["n_indent"] = 8;  // deeper than the body: the first line after the first ends it
    int status = 0;
    const json r = post_json(demo->port(), "/infill", request, &status);
    QCOMPARE(status, 200);
    const std::string content = r["content"].get<std::string>();
    for (const QString& line : later_lines(content)) QVERIFY2(indentation(line.toStdString()) >= 8, qPrintable(line));
    if (content.find('\n') != std::string::npos) QCOMPARE(r["stop_type"].get<std::string>(), std::string("limit"));
  }

  void completionWholeAndStreamed() {
    const json body = {{"prompt", "def add(a, b):\n"}, {"n_predict", 24}, {"temperature", 0}};
    int status = 0;
    const json whole = post_json(demo->port(), "/completion", body, &status);
    QCOMPARE(status, 200);
    QVERIFY(!whole["content"].get<std::string>().empty());
    QCOMPARE(whole["tokens_evaluated"].get<int>(), int(tokenizer->encode("def add(a, b):\n", true).size()));

    // streamed: the chunks' contents make the same text; the last has stop true and timings; no [DONE]
    std::vector<json> events;
    serve::SseParser parser([&](const std::string& data) { events.push_back(json::parse(data, nullptr, false)); });
    auto client = http_client(demo->port());
    httplib::Request req;
    req.method = "POST";
    req.path = "/completion";
    json streamed = body;
    streamed["stream"] = true;
    req.body = streamed.dump();
    req.set_header("Content-Type", kJson);
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      parser.feed(std::string_view(data, n));
      return true;
    };
    client.send(req);
    parser.finish();
    QVERIFY(events.size() >= 2);
    std::string text;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      QVERIFY2(events[i].is_object() && events[i]["stop"] == false, events[i].dump().c_str());
      text += events[i]["content"].get<std::string>();
    }
    QCOMPARE(events.back()["stop"].get<bool>(), true);
    QVERIFY(events.back()["timings"]["predicted_n"].get<int>() > 0);
    QCOMPARE(text, whole["content"].get<std::string>());

    // token ids for a prompt: the same completion
    json by_ids = body;
    by_ids["prompt"] = tokenizer->encode("def add(a, b):\n", true);
    QCOMPARE(post_json(demo->port(), "/completion", by_ids, &status)["content"], whole["content"]);
  }

  void completionStopsAndSeveral() {
    int status = 0;
    const json stopped = post_json(
        demo->port(), "/completion",
        {{"prompt", "def add(a, b):\n    return"}, {"n_predict", 48}, {"temperature", 0}, {"stop", {"\n"}}}, &status);
    QCOMPARE(status, 200);
    QVERIFY(stopped["content"].get<std::string>().find('\n') == std::string::npos);
    if (stopped["stop_type"] == "word") QCOMPARE(stopped["stopping_word"].get<std::string>(), std::string("\n"));

    const json several = post_json(demo->port(), "/completion",
                              {{"prompt", "def add(a, b):\n"}, {"n_predict", 16}, {"n_cmpl", 3}, {"seed", 5}}, &status);
    QCOMPARE(status, 200);
    QVERIFY2(several.is_array() && several.size() == 3, several.dump().c_str());
    for (int i = 0; i < 3; ++i) QCOMPARE(several[size_t(i)]["index"].get<int>(), i);
    QCOMPARE(post_json(demo->port(), "/completion", {{"prompt", "x"}, {"n", 2}, {"n_predict", 4}}, &status).size(),
             size_t(2));
    // n_predict beyond the context: until the context is full, and truncated says so
    const json full = post_json(demo->port(), "/completion",
                           {{"prompt", "def f():\n"}, {"n_predict", 2000000000}, {"n_cmpl", 4}, {"seed", 1}}, &status);
    QCOMPARE(status, 200);
    QCOMPARE(int(full.size()), 4);
    for (const json& c : full) {
      if (c["stop_type"] == "limit") QVERIFY2(c["truncated"].get<bool>(), c["timings"].dump().c_str());
    }

    // n_predict 0 (llama.vim's cache warm-up): the prompt only
    const json warm = post_json(demo->port(), "/infill",
                           {{"input_prefix", kLlamaVimPrefix}, {"n_predict", 0}, {"response_fields", {""}}}, &status);
    QCOMPARE(status, 200);
    QCOMPARE(warm, json::object());
  }

  void errorsAreLlamaCppsObject() {
    int status = 0;
    QVERIFY(
        is_llama_error(post_json(demo->port(), "/completion", {{"n_predict", 4}}, &status), 400, "invalid_request_error"));
    QCOMPARE(status, 400);
    QVERIFY(is_llama_error(post_json(demo->port(), "/completion", {{"prompt", "x"}, {"repeat_penalty", 1.2}}, &status), 501,
                           "not_supported_error"));
    QVERIFY(is_llama_error(post_json(demo->port(), "/completion", {{"prompt", {1, 99999999}}}, &status), 400,
                           "invalid_request_error"));
    auto client = http_client(demo->port());
    auto res = client.Get("/infill");
    QVERIFY(res && res->status == 405);
    QVERIFY(is_llama_error(json::parse(res->body), 405, "invalid_request_error"));
  }

  void invalidUtf8() {
    auto client = http_client(demo->port());
    const std::string body = "{\"input_prefix\": \"def f():\\n    s = '\xff\xfe\xc3'\\n\", \"n_predict\": 8}";
    const auto res = client.Post("/infill", body, kJson);
    QVERIFY(res);
    QCOMPARE(res->status, 400);
    QVERIFY2(is_llama_error(json::parse(res->body, nullptr, false), 400, "invalid_request_error"), res->body.c_str());
    // escaped, valid: U+FFFD and a lone high surrogate are refused by JSON itself; text is served
    int status = 0;
    post_json(demo->port(), "/infill", {{"input_prefix", "s = '\xef\xbf\xbd'\n"}, {"n_predict", 4}}, &status);
    QCOMPARE(status, 200);
  }

  void hugePrefixIsCutToTheContext() {
    std::string prefix;
    for (int i = 0; prefix.size() < 400000; ++i)
      prefix += "value_" + std::to_string(i) + " = compute(" + std::to_string(i) + ")\n";
    json request = greedy(llama_vim_request());
    request["input_prefix"] = prefix + kLlamaVimPrefix;
    request["n_predict"] = 16;
    int status = 0;
    const json r = post_json(demo->port(), "/infill", request, &status);
    QCOMPARE(status, 200);
    QCOMPARE(r["truncated"].get<bool>(), true);
    auto client = http_client(demo->port());
    const auto models = client.Get("/v1/models");
    QVERIFY(models && models->status == 200);
    const int context = json::parse(models->body)["data"][0]["max_model_len"].get<int>();
    // cut to what fits with the 16 tokens asked for, not to nothing
    QVERIFY2(r["timings/prompt_n"].get<int>() + 16 <= context, r.dump().c_str());
    QVERIFY2(r["timings/prompt_n"].get<int>() >= context / 2, r.dump().c_str());
    QVERIFY(r["content"].is_string());
  }

  void clientsThatHangUp() {
    const json before = health(demo->port());
    std::vector<std::thread> clients;
    for (int i = 0; i < 3; ++i) {
      clients.emplace_back([&, i] {
        httplib::Client client("127.0.0.1", demo->port());
        client.set_read_timeout(0, 200000);  // gives up long before 16 completions of the whole context
        const json body = {{"prompt", "def f"}, {"n_predict", -1}, {"n_cmpl", 16}, {"seed", i}};
        client.Post(i == 0 ? "/completion" : "/infill",
                    i == 0 ? body.dump() : json{{"input_prefix", "def f"}, {"n_predict", -1}, {"n_cmpl", 16}}.dump(),
                    kJson);
      });
    }
    for (auto& t : clients) t.join();
    QTRY_VERIFY_WITH_TIMEOUT(health(demo->port())["completed"].get<int>() +
                                     health(demo->port())["cancelled"].get<int>() - before["completed"].get<int>() -
                                     before["cancelled"].get<int>() ==
                                 3,
                             120000);
    QTRY_VERIFY_WITH_TIMEOUT(!health(demo->port())["generating"].get<bool>(), 60000);
    QVERIFY(health(demo->port())["cancelled"].get<int>() > before["cancelled"].get<int>());
  }

  void cleanupTestCase() {
    if (!demo) return;
    const json h = health(demo->port());
    QCOMPARE(h["status"].get<std::string>(), std::string("ok"));
    QCOMPARE(h["failed"].get<int>(), 0);
    QCOMPARE(h["kv_blocks_left"].get<int>(), 0);  // every session released its cache blocks
    QVERIFY(demo->stopsCleanly());
  }
};

QTEST_GUILESS_MAIN(TestServeEditor)
#include "test_serve_editor.moc"
