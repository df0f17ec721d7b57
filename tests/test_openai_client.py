"""`specula-cli serve` answering OpenAI's official Python client (the `openai` package).

Run by CTest as test_openai_client: python3 test_openai_client.py SPECULA_CLI MODEL.gguf
Exit 77 (CTest's skip) when the package is not importable, or when the model file is
missing outside CI; under CI=true a missing model fails.
"""
import os
import re
import subprocess
import sys

SKIP = 77


def start_server(cli, model):
    server = subprocess.Popen([cli, "serve", "-m", model, "--device", "cpu", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in server.stdout:
        m = re.search(r"listening on (http://[0-9.]+:[0-9]+)", line)
        if m:
            return server, m.group(1)
    server.wait()
    raise SystemExit("the server did not start: " + server.stderr.read())


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def main():
    try:
        import openai
    except ImportError:
        print("the openai package is not importable: skipped")
        return SKIP
    cli, model = sys.argv[1], sys.argv[2]
    if not os.path.exists(model):
        print("real model missing: " + model + " (bash models/real/fetch.sh of the shared data)")
        return 1 if os.environ.get("CI") in ("true", "1") else SKIP

    server, url = start_server(cli, model)
    try:
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
        name = client.models.list().data[0].id
        messages = [{"role": "system", "content": "You are a helpful assistant."},
                    {"role": "user", "content": "Write a Python function that adds two numbers."}]

        chat = client.chat.completions.create(model=name, messages=messages, n=4, max_tokens=24,
                                              temperature=0.8, seed=7)
        check(chat.object == "chat.completion", "object: " + chat.object)
        check(len(chat.choices) == 4, "choices: %d" % len(chat.choices))
        check(sorted(c.index for c in chat.choices) == [0, 1, 2, 3], "indices")
        for c in chat.choices:
            check(c.message.role == "assistant", "role: " + c.message.role)
            check(c.message.content, "choice %d has no content" % c.index)
            check(c.finish_reason in ("stop", "length"), "finish_reason: %s" % c.finish_reason)
        check(chat.usage.prompt_tokens > 0 and chat.usage.completion_tokens > 0, "usage: %s" % chat.usage)
        print("chat n=4:", [c.message.content for c in chat.choices])

        stream = client.chat.completions.create(model=name, messages=messages, n=2, max_tokens=16,
                                                temperature=0.7, seed=3, stream=True)
        text, finish, roles = {}, {}, {}
        for chunk in stream:
            check(chunk.object == "chat.completion.chunk", "chunk object: " + chunk.object)
            for c in chunk.choices:
                if c.delta.role:
                    roles[c.index] = c.delta.role
                if c.delta.content:
                    text[c.index] = text.get(c.index, "") + c.delta.content
                if c.finish_reason:
                    check(c.index not in finish, "two finish_reasons for index %d" % c.index)
                    finish[c.index] = c.finish_reason
        check(sorted(text) == [0, 1], "deltas for indices %s" % sorted(text))
        check(sorted(finish) == [0, 1], "finish_reason for indices %s" % sorted(finish))
        check(roles == {0: "assistant", 1: "assistant"}, "roles: %s" % roles)
        print("streamed n=2:", text, finish)

        completion = client.completions.create(model=name, prompt="def add(a, b):\n", n=3, max_tokens=12,
                                               temperature=0.8, seed=1)
        check(completion.object == "text_completion", "object: " + completion.object)
        check(len(completion.choices) == 3, "completions: %d" % len(completion.choices))
        check(all(c.text for c in completion.choices), "a completion is empty")
        print("completions n=3:", [c.text for c in completion.choices])

        # lm-evaluation-harness's log-likelihood request: token ids, echo, logprobs 1, max_tokens 0
        ids = [1, 1013, 1147, 29898, 29874]
        scored = client.completions.create(model=name, prompt=ids, echo=True, logprobs=1, max_tokens=0,
                                           temperature=0)
        lp = scored.choices[0].logprobs
        check(len(lp.token_logprobs) == len(ids) and lp.token_logprobs[0] is None,
              "echoed log-probabilities: %s" % lp.token_logprobs)
        check(all(v < 0 for v in lp.token_logprobs[1:]), "a log-probability is not negative")
        check(all(len(t) == 1 and max(t.values()) >= v - 1e-6
                  for t, v in zip(lp.top_logprobs[1:], lp.token_logprobs[1:])), "top_logprobs: %s" % lp.top_logprobs)
        print("echo scored:", scored.choices[0].text, lp.token_logprobs[1:])

        try:
            client.chat.completions.create(model=name, messages=[{"role": "user"}])
            check(False, "a message without content was accepted")
        except openai.BadRequestError as e:
            check("content" in str(e), "the error does not name the content: %s" % e)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
