// llama.cpp's native wire format without a network: response_fields flattening, the
// requests llama.vim sends read field by field, llama.cpp's error object and its 501 for a
// model without FIM tokens, the infill prompt in llama.cpp's layouts (repository level and
// snippets, StarCoder's vocabulary) and cut as llama.cpp cuts it, the n_indent cut where
// llama.cpp makes it, the fallback's dedent and repeated-line cuts and the hole's indentation.
#include <QtTest>

#include <string>

#include "model/gguf.h"
#include "serve/llama_api.h"
#include "shared_data.h"

using namespace specula;
using namespace specula::serve;
using nlohmann::json;

namespace {

ApiError refusal(LlamaEndpoint endpoint, const std::string& body) {
  try {
    parse_llama_request(endpoint, body, 8);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "accepted");
}

}  // namespace

class TestLlamaApi : public QObject {
  Q_OBJECT

 private slots:
  void responseFieldsAreFlattened() {
    const json response = {{"content", "x = 1"},
                           {"truncated", false},
                           {"timings", {{"prompt_n", 12}, {"predicted_ms", 3.5}}},
                           {"tokens_cached", 0}};
    const json picked = select_fields(response, {"content", "timings/prompt_n", "timings/predicted_ms", "truncated",
                                                 "timings/missing", "absent", "content/deeper", ""});
    const json expected = {
        {"content", "x = 1"}, {"timings/prompt_n", 12}, {"timings/predicted_ms", 3.5}, {"truncated", false}};
    QCOMPARE(picked, expected);
  }

  void llamaVimsRequestIsRead() {
    // autoload/llama.vim's fim request, as json_encode writes it (time is a reltime() list)
    const json body = {{"input_prefix", "def f(x):\n"},
                       {"input_suffix", "\n    return y\n"},
                       {"input_extra", json::array({{{"text", "import os\n"}, {"time", {1, 2}}, {"filename", "a.py"}},
                                                    {{"text", "X = 1\n"}}})},
                       {"prompt", "    y = "},
                       {"n_predict", 128},
                       {"stop", json::array()},
                       {"n_indent", 4},
                       {"top_k", 40},
                       {"top_p", 0.90},
                       {"stream", false},
                       {"samplers", {"top_k", "top_p", "infill"}},
                       {"cache_prompt", true},
                       {"t_max_prompt_ms", 500},
                       {"t_max_predict_ms", 1000},
                       {"response_fields", {"content", "timings/prompt_n", "truncated", "tokens_cached"}}};
    const LlamaRequest r = parse_llama_request(LlamaEndpoint::Infill, body.dump(), 8);
    QCOMPARE(r.input_prefix, std::string("def f(x):\n"));
    QCOMPARE(r.input_suffix, std::string("\n    return y\n"));
    QCOMPARE(int(r.input_extra.size()), 2);
    QCOMPARE(r.input_extra[0].filename, std::string("a.py"));
    QCOMPARE(r.input_extra[1].filename, std::string("tmp"));  // llama.cpp's name for an unnamed chunk
    QCOMPARE(r.prompt.at(0).text, std::string("    y = "));
    QCOMPARE(r.n_predict, 128);
    QCOMPARE(r.n_indent, 4);
    QCOMPARE(r.t_max_predict_ms, 1000LL);
    QCOMPARE(int(r.response_fields.size()), 4);
    // no temperature sampler in the list: llama.cpp samples the distribution as it is (T = 1)
    QCOMPARE(r.sampling.temperature, 1.0f);
    QCOMPARE(r.sampling.top_k, 40);
    QCOMPARE(r.sampling.top_p, 0.9f);
    QCOMPARE(r.sampling.min_p, 0.0f);
    QVERIFY(!r.seed);

    // without a samplers list, llama.cpp's defaults, and a temperature that is asked for
    const LlamaRequest plain = parse_llama_request(
        LlamaEndpoint::Completion, R"({"prompt": [1, 2, "x"], "temperature": 0, "seed": 7, "n": 3})", 8);
    QCOMPARE(plain.sampling.temperature, 0.0f);
    QCOMPARE(plain.sampling.top_k, 40);
    QCOMPARE(plain.sampling.top_p, 0.95f);
    QCOMPARE(plain.sampling.min_p, 0.05f);
    QCOMPARE(*plain.seed, uint64_t(7));
    QCOMPARE(plain.n, 3);
    QCOMPARE(int(plain.prompt.size()), 3);
    QCOMPARE(plain.prompt[1].id, 2);
    QCOMPARE(plain.prompt[2].text, std::string("x"));
  }

  void errorsAreLlamaCppsObject_data() {
    QTest::addColumn<int>("endpoint");
    QTest::addColumn<QByteArray>("body");
    QTest::addColumn<int>("status");
    QTest::newRow("malformed") << 0 << QByteArray(R"({"prompt": )") << 400;
    QTest::newRow("invalid UTF-8") << 1 << QByteArray("{\"input_prefix\": \"a\xff\xfe b\"}") << 400;
    QTest::newRow("no prompt") << 0 << QByteArray(R"({"n_predict": 4})") << 400;
    QTest::newRow("several prompts") << 0 << QByteArray(R"({"prompt": ["a", "b"]})") << 400;
    QTest::newRow("n_predict -2") << 0 << QByteArray(R"({"prompt": "a", "n_predict": -2})") << 400;
    QTest::newRow("n beyond") << 0 << QByteArray(R"({"prompt": "a", "n_cmpl": 9})") << 400;
    QTest::newRow("extra without text") << 1 << QByteArray(R"({"input_extra": [{"filename": "a"}]})") << 400;
    QTest::newRow("unknown sampler") << 1 << QByteArray(R"({"samplers": ["beam"]})") << 400;
    QTest::newRow("repeat penalty") << 0 << QByteArray(R"({"prompt": "a", "repeat_penalty": 1.3})") << 501;
    QTest::newRow("grammar") << 0 << QByteArray(R"({"prompt": "a", "grammar": "root ::= x"})") << 501;
  }
  void errorsAreLlamaCppsObject() {
    QFETCH(int, endpoint);
    QFETCH(QByteArray, body);
    QFETCH(int, status);
    const ApiError e = refusal(endpoint ? LlamaEndpoint::Infill : LlamaEndpoint::Completion, body.toStdString());
    QCOMPARE(e.status, status);
    const json shape = llama_error_json(e);
    QCOMPARE(shape["error"]["code"].get<int>(), status);
    QCOMPARE(shape["error"]["type"].get<std::string>(),
             std::string(status == 501 ? "not_supported_error" : "invalid_request_error"));
    QVERIFY(!shape["error"]["message"].get<std::string>().empty());
    // the neutral values of the samplers Specula lacks are accepted
    parse_llama_request(LlamaEndpoint::Completion,
                        R"({"prompt": "a", "repeat_penalty": 1.0, "grammar": "", "logit_bias": []})", 8);
  }

  void noFimTokensIsLlamaCppsMessage() {
    const ApiError e = infill_not_supported(FimTokens{});
    QCOMPARE(e.status, 501);
    QCOMPARE(std::string(e.what()), std::string("Infill is not supported by this model: prefix token is missing. "
                                                "suffix token is missing. middle token is missing. "));
  }

  void infillPromptLayout() {
    SPECULA_SHARED_FILE(path, "tokenizers/bpe-vocab/ggml-vocab-starcoder.gguf");
    Vocabulary vocab = gguf_vocabulary(GgufFile::open(path));
    const auto id_of = [&](const std::string& piece) {
      return int(std::find(vocab.pieces.begin(), vocab.pieces.end(), piece) - vocab.pieces.begin());
    };
    QVERIFY(id_of("<repo_name>") < vocab.size() && id_of("<file_sep>") < vocab.size());
    LlamaRequest r;
    r.endpoint = LlamaEndpoint::Infill;
    r.input_prefix = "def area(r):\n";
    r.prompt = {PromptPiece{.text = "    return"}};
    r.input_suffix = "\n\nprint(area(2))\n";
    r.input_extra = {ExtraChunk{.filename = "consts.py", .text = "PI = 3.14159\n"}};
    const auto cat = [](std::vector<int> a, const std::vector<int>& b) {
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    // StarCoder2's repository-level tokens: <repo_name>myproject, a <file_sep>name line per file
    const auto repo = create_tokenizer(vocab);
    const FimTokens& fim = repo->fim();
    QVERIFY(fim.repo >= 0 && fim.sep >= 0);
    const std::vector<int> local = repo->fim_prompt("def area(r):\n    return", r.input_suffix);
    InfillPrompt p = infill_prompt(*repo, r, 512, false);
    std::vector<int> expected = cat(cat({fim.repo}, repo->encode("myproject\n", false)), {fim.sep});
    expected =
        cat(cat(cat(expected, repo->encode("consts.py\n", false)), repo->encode("PI = 3.14159\n", false)), {fim.sep});
    expected = cat(expected, repo->encode("filename\n", false));
    QCOMPARE(p.ids, cat(expected, local));  // the extra context, then the family's FIM prompt of prefix + prompt
    QVERIFY(!p.truncated);

    // a vocabulary without them: each file after a snippet line
    Vocabulary no_repo = vocab;
    no_repo.pieces[size_t(id_of("<repo_name>"))] = "<unused_repo>";
    no_repo.pieces[size_t(id_of("<file_sep>"))] = "<unused_sep>";
    const auto snippets = create_tokenizer(no_repo);
    QVERIFY(snippets->fim().repo < 0 && snippets->fim().sep < 0);
    expected = cat(snippets->encode("\n\n--- snippet ---\n\n", false), snippets->encode("PI = 3.14159\n", false));
    QCOMPARE(infill_prompt(*snippets, r, 512, false).ids, cat(expected, local));

    // too long: the extra context loses its start first, then the prefix keeps its end (3/4 of
    // the room) and the suffix its start
    const std::vector<int> repo_extra(p.ids.begin(), p.ids.end() - long(local.size()));
    p = infill_prompt(*repo, r, int(local.size()) + 5, false);
    QVERIFY(p.truncated);
    QCOMPARE(p.ids, cat(std::vector<int>(repo_extra.end() - 5, repo_extra.end()), local));
    const int room = 8;
    p = infill_prompt(*repo, r, room + 3, false);  // the prefix, suffix and middle tokens besides
    QVERIFY(p.truncated);
    QCOMPARE(int(p.ids.size()), room + 3);
    const Tokenizer::FimParts parts = repo->fim_parts("def area(r):\n    return", r.input_suffix);
    const size_t keep = std::min(parts.prefix.size(), size_t(3 * room / 4));
    QVERIFY(keep < parts.prefix.size());
    QCOMPARE(p.ids.front(), fim.prefix);
    QCOMPARE(std::vector<int>(p.ids.begin() + 1, p.ids.begin() + 1 + long(keep)),
             std::vector<int>(parts.prefix.end() - long(keep), parts.prefix.end()));
    QCOMPARE(p.ids[keep + 1], fim.suffix);
    QCOMPARE(std::vector<int>(p.ids.begin() + long(keep) + 2, p.ids.end() - 1),
             std::vector<int>(parts.suffix.begin(), parts.suffix.begin() + long(room - keep)));
    QCOMPARE(p.ids.back(), fim.middle);

    // suffix first (llama.cpp's --spm-infill, and a vocabulary whose file says specula.fim.order
    // "spm"): <fim_suffix> suffix <fim_prefix> prefix <fim_middle>, the same parts, cut alike
    std::vector<int> spm_body = cat({fim.suffix}, parts.suffix);
    spm_body = cat(cat(spm_body, {fim.prefix}), parts.prefix);
    spm_body.push_back(fim.middle);
    QCOMPARE(infill_prompt(*repo, r, 512, false, true).ids, cat(repo_extra, spm_body));
    Vocabulary spm_vocab = vocab;
    spm_vocab.fim.spm = true;
    const auto spm = create_tokenizer(spm_vocab);
    QVERIFY(spm->fim().spm && !repo->fim().spm);
    const std::vector<int> bos = spm_vocab.add_bos ? std::vector<int>{spm->bos()} : std::vector<int>{};
    QCOMPARE(spm->fim_prompt("def area(r):\n    return", r.input_suffix), cat(bos, spm_body));
    QCOMPARE(infill_prompt(*spm, r, 512, false).ids, cat(repo_extra, spm_body));
    p = infill_prompt(*spm, r, room + 3, false);
    QCOMPARE(p.ids.front(), fim.suffix);
    QCOMPARE(p.ids[size_t(room - keep) + 1], fim.prefix);
    QCOMPARE(std::vector<int>(p.ids.end() - 1 - long(keep), p.ids.end() - 1),
             std::vector<int>(parts.prefix.end() - long(keep), parts.prefix.end()));

    // no FIM tokens: 501, or with the fallback the prefix and the prompt as plain text
    Vocabulary plain = vocab;
    plain.fim = FimTokens{};
    for (const char* piece : {"<fim_prefix>", "<fim_suffix>", "<fim_middle>"})
      plain.pieces[size_t(id_of(piece))] = std::string("<unused_") + piece + ">";
    const auto none = create_tokenizer(plain);
    QVERIFY(!none->fim().complete());
    try {
      infill_prompt(*none, r, 512, false);
      QFAIL("a model without FIM tokens took an infill prompt");
    } catch (const ApiError& e) {
      QCOMPARE(e.status, 501);
    }
    p = infill_prompt(*none, r, 512, true);
    QCOMPARE(p.ids, none->encode("def area(r):\n    return", true));
    QCOMPARE(p.hole_indent, 4);
  }

  void indentCutIsLlamaCpps() {
    using std::string_view;
    // the first line is never checked; a later line with less indentation ends it after its whitespace
    QCOMPARE(indent_end("x = 1\n    y = 2\n  z\n", 4), string_view("x = 1\n    y = 2\n  ").size());
    QCOMPARE(indent_end("x = 1\n    y = 2\n", 4), std::string_view::npos);
    QCOMPARE(indent_end("x\n  ", 4), std::string_view::npos);     // the line is not decided yet
    QCOMPARE(indent_end("x\n\n", 4), string_view("x\n").size());  // an empty line, as llama.cpp
    QCOMPARE(indent_end("x\ny", 0), std::string_view::npos);
    QCOMPARE(indent_end("x\n\ty\n", 1), std::string_view::npos);  // a tab counts one
  }

  void timeLimitKeepsTheWholeLines() {
    using std::string_view;
    QCOMPARE(time_limit_end("x = 1\n    y = 2\n    z = "), string_view("x = 1\n    y = 2\n").size());
    QCOMPARE(time_limit_end("x = 1\n"), string_view("x = 1\n").size());
    QCOMPARE(time_limit_end("return [v for v in"), string_view("return [v for v in").size());  // not waited for
    QCOMPARE(time_limit_end(""), size_t{0});
  }

  void dedentCutDropsTheLine() {
    using std::string_view;
    QCOMPARE(dedent_end("y = 2\n    return y\n\ndef g():\n", 4), string_view("y = 2\n    return y\n\n").size());
    QCOMPARE(dedent_end("y = 2\n    return y\n  ", 4), std::string_view::npos);  // blank so far
    QCOMPARE(dedent_end("y\nz\n", 0), std::string_view::npos);
  }

  void repeatedLineEndsTheFallback() {
    using std::string_view;
    QCOMPARE(next_line("\n\n    return total\r\nx\n"), string_view("    return total"));
    QCOMPARE(next_line("rest of line\n  \n"), string_view());
    const string_view text = " v in values:\n        total += v\n    return total\n";
    QCOMPARE(repeat_end(text, "    return total"), string_view(" v in values:\n        total += v\n").size());
    QCOMPARE(repeat_end(" v:\n    return total + 1\n", "    return total"),
             std::string_view::npos);                                                           // not the same line
    QCOMPARE(repeat_end(" v:\n    return total", "    return total"), std::string_view::npos);  // not complete yet
    QCOMPARE(repeat_end("    return total\n", "    return total"),
             std::string_view::npos);  // the first line continues the cursor's
  }

  void holeIndentation() {
    QCOMPARE(hole_indentation("def f(x):\n    y = ", "\n    return y\n"), 4);  // text before the cursor
    QCOMPARE(hole_indentation("def f(x):\n", "\n\n        return y\n"), 8);    // the next non-blank line
    QCOMPARE(hole_indentation("def f(x):\n  ", "\ndef g():\n"), 2);            // whitespace typed
    QCOMPARE(hole_indentation("x = 1\n", ""), 0);
  }
};

QTEST_GUILESS_MAIN(TestLlamaApi)
#include "test_llama_api.moc"
