// The text layer of a session (session.h) with the real SentencePiece tokenizer of
// stories260K over the controlled fake backend: streamed deltas add up to the final text,
// stop strings and the text_end hook cut the completion and end only their candidate, a prompt
// given as ids, per-candidate seeds,
// fill-in-the-middle prompts (StarCoder's vocabulary), and bad requests get clear errors.
#include <QtTest>

#include <atomic>
#include <thread>

#include "fake_backend.h"
#include "decode/prompt_style.h"
#include "decode/session.h"
#include "model/gguf.h"
#include "shared_data.h"
#include "model/tokenizer.h"

using namespace specula;
using namespace specula::test;

namespace {

std::shared_ptr<Model> fake_model_with_tokenizer(const std::string& tokenizer_path, const std::string& name = "target") {
  auto vocab = load_vocabulary(tokenizer_path);
  auto model = make_fake_model(name, vocab.size(), 4, 512);
  model->tokenizer = create_tokenizer(std::move(vocab));
  return model;
}

GenerationRequest request(int n, const std::string& drafter = "layers:2") {
  GenerationRequest r;
  r.prompt = "Once upon a time";
  r.n_candidates = n;
  r.max_new_tokens = 40;
  r.sampling = SamplingParams{0.9f, 0, 1.0f, 0.0f, 3};
  r.draft.kind = drafter;
  r.draft.policy = "bass";
  return r;
}

}  // namespace

class TestSession : public QObject {
  Q_OBJECT

 private slots:
  void deltasAddUpToTheText() {
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const auto model = fake_model_with_tokenizer(tok);
    FakeBackend backend;
    std::vector<std::string> streamed(4);
    int finished = 0;
    SessionCallbacks cb;
    cb.on_delta = [&](const CandidateDelta& d) {
      streamed[static_cast<size_t>(d.index)] += d.text;
      QVERIFY(d.accepted <= d.proposed);
    };
    cb.on_finished = [&](const Candidate&) { ++finished; };
    const auto r = run_session(backend, *model, request(4), cb);
    QCOMPARE(finished, 4);
    const auto prompt = model->tokenizer->encode("Once upon a time", true);
    for (const Candidate& c : r.candidates) {
      QCOMPARE(streamed[static_cast<size_t>(c.index)], c.text);
      // the completion is the decode of prompt + tokens minus the prompt's text
      std::vector<int> all = prompt;
      all.insert(all.end(), c.tokens.begin(), c.tokens.end());
      QCOMPARE(model->tokenizer->decode(prompt) + c.text, model->tokenizer->decode(all));
      QCOMPARE(c.logprobs.size(), c.tokens.size());
    }
    // seeds differ per candidate, so (with overwhelming probability) the texts do too
    QVERIFY(r.candidates[0].text != r.candidates[1].text);
    QCOMPARE(r.totals.generated_tokens, 4 * 40);
    QVERIFY(r.totals.target_forwards > 1);
  }

  // Token healing: "Once upon a t" ends in the piece "▁t", which longer pieces extend
  // ("▁the", "▁time", ...). The prompt is given without it, every candidate's first token is
  // one of those that begin with it, and the candidates' text starts after its " t".
  void tokenHealingExtendsTheLastToken() {
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const auto model = fake_model_with_tokenizer(tok);
    const Tokenizer& tokenizer = *model->tokenizer;
    const std::vector<int> ids = tokenizer.encode("Once upon a t", true);
    const HealedPrompt healed = heal_prompt(tokenizer, ids);
    QCOMPARE(healed.ids, std::vector<int>(ids.begin(), ids.end() - 1));
    QCOMPARE(healed.removed, std::string(" t"));
    QVERIFY(healed.first_tokens.size() >= 2);
    QVERIFY(std::find(healed.first_tokens.begin(), healed.first_tokens.end(), ids.back()) != healed.first_tokens.end());
    for (int id : healed.first_tokens) QVERIFY2(tokenizer.piece(id).starts_with("\u2581t"), tokenizer.piece(id).c_str());
    // nothing extends a byte token, nor a prompt of one token
    QVERIFY(heal_prompt(tokenizer, tokenizer.encode("Once upon a time\n", true)).first_tokens.empty());
    QVERIFY(heal_prompt(tokenizer, {ids.front()}).first_tokens.empty());

    FakeBackend backend;
    std::vector<std::string> greedy;
    for (const char* drafter : {"none", "layers:2"}) {
      GenerationRequest r = request(4, drafter);
      r.prompt = "Once upon a t";
      r.token_healing = true;
      r.sampling.temperature = 0.0f;
      const SessionResult result = run_session(backend, *model, r, {});
      for (const Candidate& c : result.candidates) {
        QVERIFY(!c.tokens.empty());
        QVERIFY(std::find(healed.first_tokens.begin(), healed.first_tokens.end(), c.tokens[0]) !=
                healed.first_tokens.end());
        std::vector<int> all = healed.ids;
        all.insert(all.end(), c.tokens.begin(), c.tokens.end());
        QCOMPARE(tokenizer.decode(healed.ids) + " t" + c.text, tokenizer.decode(all));
      }
      greedy.push_back(result.candidates[0].text);
    }
    QCOMPARE(greedy[1], greedy[0]);  // speculation keeps a healed greedy output exact
  }

  void sameSeedSameSession() {
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const auto model = fake_model_with_tokenizer(tok);
    FakeBackend backend;
    const auto a = run_session(backend, *model, request(3));
    const auto b = run_session(backend, *model, request(3));
    for (int i = 0; i < 3; ++i) QCOMPARE(a.candidates[i].tokens, b.candidates[i].tokens);
  }

  void stopStringCutsItsCandidate() {
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const auto model = fake_model_with_tokenizer(tok);
    FakeBackend backend;
    auto req = request(3);
    const auto free_run = run_session(backend, *model, req);
    const std::string full = free_run.candidates[1].text;
    QVERIFY(full.size() > 30);
    const std::string stop = full.substr(15, 4);
    const size_t first = full.find(stop);
    req.stop = {stop};
    std::string streamed;
    SessionCallbacks cb;
    cb.on_delta = [&](const CandidateDelta& d) {
      if (d.index == 1) streamed += d.text;
    };
    const auto r = run_session(backend, *model, req, cb);
    const Candidate& c = r.candidates[1];
    QCOMPARE(c.finish, FinishReason::Stop);
    QCOMPARE(c.text, full.substr(0, first));
    QCOMPARE(streamed, c.text);  // nothing of the stop string ever went out
    for (const Candidate& other : r.candidates) {
      QVERIFY(other.text.find(stop) == std::string::npos);
      if (other.finish != FinishReason::Stop) QCOMPARE(other.finish, FinishReason::Length);
    }
  }

  void textEndCutsOnlyItsCandidate() {
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const auto model = fake_model_with_tokenizer(tok);
    FakeBackend backend;
    auto req = request(3);
    req.sampling.temperature = 0.0f;  // greedy: the other candidates' tokens do not depend on the drafts
    const auto free_run = run_session(backend, *model, req);
    const std::string full = free_run.candidates[2].text;
    QVERIFY(full.size() > 30);
    int calls = 0;
    bool whole_text = true;
    req.text_end = [&](int index, const std::string& text) -> size_t {
      if (index != 2) return std::string::npos;
      ++calls;
      whole_text &= full.rfind(text, 0) == 0;  // the whole text so far
      return text.size() >= 20 ? size_t(17) : std::string::npos;
    };
    std::string streamed;
    SessionCallbacks cb;
    cb.on_delta = [&](const CandidateDelta& d) {
      if (d.index == 2) streamed += d.text;
    };
    const auto r = run_session(backend, *model, req, cb);
    QVERIFY(calls > 0);
    QVERIFY(whole_text);
    const Candidate& c = r.candidates[2];
    QCOMPARE(c.finish, FinishReason::Stop);
    // cut at 17: with a hook, text streams whole lines, so nothing of the line in progress had gone out
    QVERIFY(full.find('\n') > 17);
    QCOMPARE(c.text, full.substr(0, 17));
    QCOMPARE(streamed, c.text);
    for (int i : {0, 1}) QCOMPARE(r.candidates[size_t(i)].text, free_run.candidates[size_t(i)].text);

    // the prompt as ids: the same session as the prompt as text
    auto by_ids = request(3);
    by_ids.sampling.temperature = 0.0f;
    by_ids.prompt_ids = model->tokenizer->encode(by_ids.prompt, true);
    by_ids.prompt = "ignored when ids are given";
    const auto same = run_session(backend, *model, by_ids);
    for (int i = 0; i < 3; ++i) QCOMPARE(same.candidates[size_t(i)].tokens, free_run.candidates[size_t(i)].tokens);
  }

  void codeStops() {
    const auto& stops = code_stop_strings();
    QCOMPARE(stops.size(), size_t{4});
    QVERIFY(std::find(stops.begin(), stops.end(), "\ndef ") != stops.end());
    QVERIFY(std::find(stops.begin(), stops.end(), "\nif __name__") != stops.end());
  }

  void cancelEndsEveryCandidate() {
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const auto model = fake_model_with_tokenizer(tok);
    FakeBackend backend;
    backend.delay_ms = 5;
    auto req = request(4, "ngram");
    req.max_new_tokens = 300;
    std::atomic<bool> stop{false};
    std::atomic<int> deltas{0};
    SessionCallbacks cb;
    cb.on_delta = [&](const CandidateDelta&) { ++deltas; };
    SessionResult r;
    std::thread worker([&] { r = run_session(backend, *model, req, cb, &stop); });
    while (deltas.load() < 8) std::this_thread::yield();
    stop = true;
    worker.join();
    for (const Candidate& c : r.candidates) {
      QCOMPARE(c.finish, FinishReason::Cancelled);
      QVERIFY(static_cast<int>(c.tokens.size()) < 300);
    }
  }

  // The chat prompt style: which style each request gets, the chat prefix made of the
  // template's rendering of the request for the function, and the ids the model reads (the
  // chat's special-token texts parsed, no BOS), while the prompt stays the code.
  void chatPromptStyle() {
    QCOMPARE(parse_prompt_style("chat"), PromptStyle::Chat);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_prompt_style("instruct"));
    QCOMPARE(resolve_prompt_style(PromptStyle::Auto, true, false), PromptStyle::Chat);
    QCOMPARE(resolve_prompt_style(PromptStyle::Auto, true, true), PromptStyle::Raw);
    QCOMPARE(resolve_prompt_style(PromptStyle::Auto, false, false), PromptStyle::Raw);
    QCOMPARE(resolve_prompt_style(PromptStyle::Raw, true, false), PromptStyle::Raw);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, resolve_prompt_style(PromptStyle::Chat, false, false));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, resolve_prompt_style(PromptStyle::Chat, true, true));

    SPECULA_SHARED_FILE(starcoder, "tokenizers/bpe-vocab/ggml-vocab-starcoder.gguf");
    Vocabulary vocab = gguf_vocabulary(GgufFile::open(starcoder));
    auto model = make_fake_model("target", vocab.size(), 4, 512);
    model->tokenizer = create_tokenizer(std::move(vocab));
    const Tokenizer& tokenizer = *model->tokenizer;
    const ModelChatTemplate chat{.source = "{% for m in messages %}<|endoftext|>{{ m.role }}: {{ m.content }}\n{% endfor %}"
                                           "{% if add_generation_prompt %}<|endoftext|>assistant: {% endif %}"};
    GenerationRequest r = request(2, "ngram");
    r.prompt = "def add(a, b):\n";
    r.sampling.temperature = 0;
    r.max_new_tokens = 8;
    use_chat_prompt(r, chat);
    QCOMPARE(r.prompt, std::string("def add(a, b):\n"));
    const nlohmann::ordered_json ask = nlohmann::ordered_json::array(
        {{{"role", "user"}, {"content", "Complete the following Python function:\n```python\ndef add(a, b):\n```"}}});
    QCOMPARE(*r.chat_prefix, render_chat(chat, ask, true) + "```python\n");
    QVERIFY(std::find(r.stop.begin(), r.stop.end(), std::string(kChatCodeStop)) != r.stop.end());
    const std::vector<int> ids = request_prompt_ids(tokenizer, r);
    QCOMPARE(ids, tokenizer.encode(*r.chat_prefix + r.prompt, false, true));
    QVERIFY(ids != tokenizer.encode(*r.chat_prefix + r.prompt, false, false));  // <|endoftext|> is one token
    FakeBackend backend;
    QCOMPARE(run_session(backend, *model, r).totals.prompt_tokens, static_cast<int>(ids.size()));
    r.suffix = "\n";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, request_prompt_ids(tokenizer, r));
  }

  // A chat model's answer as a completion of the prompt: an answer that continues the prefill
  // is taken as it is; one that starts over gives the function's body from its code block,
  // whatever comes before or after the block, and with or without the docstring restated.
  void chatAnswersBecomeCompletions() {
    const std::string prompt = "import math\n\ndef area(r):\n    \"\"\"The area of a circle.\"\"\"\n";
    const std::string body = "    return math.pi * r * r\n";
    QCOMPARE(chat_code_messages(prompt).back()["content"].get<std::string>(), "```python\n" + prompt);
    QCOMPARE(chat_code_messages(prompt).back()["role"].get<std::string>(), std::string("assistant"));

    QCOMPARE(chat_answer_continues(prompt, body, false), std::optional<bool>(true));
    QCOMPARE(chat_answer_continues(prompt, "\n" + body, false), std::optional<bool>(true));
    QCOMPARE(chat_answer_continues(prompt, "    return", false), std::nullopt);  // the line may go on
    QCOMPARE(chat_answer_continues(prompt, "    return", true), std::optional<bool>(true));
    QCOMPARE(chat_answer_continues(prompt, "```python\n", false), std::optional<bool>(false));
    QCOMPARE(chat_answer_continues(prompt, "Here is the function:\n", false), std::optional<bool>(false));
    QCOMPARE(chat_answer_continues(prompt, "\n\n", false), std::nullopt);
    QCOMPARE(chat_answer_continues("x = (", "1)\n", false), std::optional<bool>(true));  // mid-line: it goes on
    QCOMPARE(chat_answer_continues("x = (", "```", true), std::optional<bool>(false));

    // the block restates the prompt: what follows it
    QCOMPARE(completion_from_chat_answer(prompt, "```python\n" + prompt + body + "```\nDone."), body);
    // prose, then the function without the import and with another docstring quote style
    const std::string restated = "Sure! Here it is:\n\n```python\ndef area(r):\n    '''Area.'''\n" + body +
                                 "```\n\nIt multiplies.";
    QCOMPARE(completion_from_chat_answer(prompt, restated), body);
    // a signature on several lines, no docstring in the answer
    const std::string wrapped = "```python\ndef area(\n    r,\n):\n" + body + "\n\nprint(area(2))\n```";
    QCOMPARE(completion_from_chat_answer(prompt, wrapped), body + "\n\nprint(area(2))\n");
    // no docstring in the prompt: the answer's line after the signature is body
    QCOMPARE(completion_from_chat_answer("def f(x):\n", "```py\ndef f(x):\n    \"\"\"Doc.\"\"\"\n    return x\n```"),
             std::string("    \"\"\"Doc.\"\"\"\n    return x\n"));
    // a bare function without a fence, after a sentence
    QCOMPARE(completion_from_chat_answer(prompt, "The function:\ndef area(r):\n" + body), body);
    // nothing of the function: the block as it is; an unclosed block to its end
    QCOMPARE(completion_from_chat_answer(prompt, "```\nprint(1)\n```"), std::string("print(1)\n"));
    QCOMPARE(completion_from_chat_answer(prompt, "```python\n" + prompt + "    return"), std::string("    return"));
  }

  // With a suffix the model is given the fill-in-the-middle prompt of its family, and the
  // candidates continue that prompt as plain greedy decoding from it does.
  void fillInTheMiddle() {
    SPECULA_SHARED_FILE(starcoder, "tokenizers/bpe-vocab/ggml-vocab-starcoder.gguf");
    Vocabulary vocab = gguf_vocabulary(GgufFile::open(starcoder));
    auto model = make_fake_model("target", vocab.size(), 4, 512);
    model->tokenizer = create_tokenizer(std::move(vocab));
    const Tokenizer& tokenizer = *model->tokenizer;
    GenerationRequest r = request(2, "ngram");
    r.prompt = "def add(a, b):\n    return ";
    r.suffix = "\n\nprint(add(1, 2))\n";
    r.sampling.temperature = 0;
    r.max_new_tokens = 12;
    const std::vector<int> fim = tokenizer.fim_prompt(r.prompt, *r.suffix);
    QCOMPARE(request_prompt_ids(tokenizer, r), fim);
    QVERIFY(fim != tokenizer.encode(r.prompt, true));

    FakeBackend backend;
    const SessionResult result = run_session(backend, *model, r);
    QCOMPARE(result.totals.prompt_tokens, static_cast<int>(fim.size()));
    const std::vector<int> expected = plain_greedy(*model, fim, r.max_new_tokens);
    for (const Candidate& c : result.candidates) {
      QVERIFY(c.tokens.size() <= expected.size());
      QCOMPARE(c.tokens, std::vector<int>(expected.begin(), expected.begin() + static_cast<long>(c.tokens.size())));
      if (c.tokens.size() < expected.size()) QVERIFY(tokenizer.ends_generation(expected[c.tokens.size()]));
    }
    // an empty prefix is still a prompt: the FIM tokens around the suffix
    r.prompt.clear();
    QCOMPARE(run_session(backend, *model, r).totals.prompt_tokens, static_cast<int>(tokenizer.fim_prompt("", *r.suffix).size()));
  }

  void badRequests() {
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    const auto model = fake_model_with_tokenizer(tok);
    FakeBackend backend;
    const auto fails = [&](GenerationRequest r, const char* words) {
      try {
        run_session(backend, *model, r);
      } catch (const std::invalid_argument& e) {
        return QString(e.what()).contains(words);
      }
      return false;
    };
    auto r = request(2);
    r.prompt.clear();
    QVERIFY(fails(r, "prompt is empty"));
    r = request(0);
    QVERIFY(fails(r, "between 1 and"));
    r = request(kMaxCandidates + 1);
    QVERIFY(fails(r, "between 1 and"));
    r = request(2);
    r.budget_seconds = -1;
    QVERIFY(fails(r, "budget"));
    r = request(2, "layers:0");
    QVERIFY(fails(r, "layers:0"));
    r = request(2, "layers:9");
    QVERIFY(fails(r, "between 1 and"));
    r = request(2);
    r.sampling.top_p = 0;
    QVERIFY(fails(r, "top-p"));
    r = request(2);
    r.stop = {""};
    QVERIFY(fails(r, "stop string"));
    r = request(2);
    r.suffix = "";  // stories260K's vocabulary has no FIM tokens
    QVERIFY(fails(r, "fill-in-the-middle"));

    // a draft model whose tokenizer differs in one piece
    auto vocab = load_vocabulary(tok);
    vocab.pieces[300] = "▁zebra";
    auto draft = make_fake_model("draft", vocab.size(), 2, 512);
    draft->tokenizer = create_tokenizer(std::move(vocab));
    r = request(2, "model");
    r.draft.draft_model = draft;
    QVERIFY(fails(r, "token 300"));
    // the same tokenizer is fine
    auto same = fake_model_with_tokenizer(tok, "draft");
    r.draft.draft_model = same;
    QCOMPARE(run_session(backend, *model, r).candidates.size(), size_t{2});
  }
};

QTEST_GUILESS_MAIN(TestSession)
#include "test_session.moc"
