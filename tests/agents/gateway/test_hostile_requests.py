"""One client's bad request is refused alone: the gateway checks every request before it joins a
batch (400 with its ``param``), a request the model fails on anyway fails alone, a body is read
no further than its limit (413), only JSON is taken (415, so a cross-site form cannot post), and
a gateway bound to any loopback address answers only loopback names."""

import json
import select
import socket
import threading

import httpx
import pytest
from doc_blocks import free_port, serve, stop

from searchgym.agents.gateway.checks import MAX_BODY_BYTES, MAX_JSON_DEPTH
from searchgym.agents.gateway.server import Gateway
from searchgym.agents.policies.hf import HFPolicy
from searchgym.generation import SamplingParams

GREEDY = SamplingParams(max_new_tokens=5, temperature=0.0)


@pytest.fixture(scope="module")
def policy(tiny_llama_dir):
    return HFPolicy(str(tiny_llama_dir), device="cpu", dtype="float32", seed=0)


@pytest.fixture
def gateway(policy):
    """As ``searchgym gateway`` serves: any key, sampling taken from requests."""
    with Gateway(policy, GREEDY, open_keys=True, sampling_from_requests=True) as gateway:
        yield gateway


def post(url, body, key="k", path="/v1/completions", **headers):
    content = body if isinstance(body, (str, bytes)) else json.dumps(body)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **headers}
    return httpx.post(url + path, content=content, headers=headers, timeout=120)


def test_a_poisoned_request_fails_alone_and_the_batch_it_joined_answers_as_if_it_were_not_there(policy):
    prompts = [f"Count to {i}:" for i in range(8)]
    with Gateway(policy, GREEDY, window_s=0.5) as gateway:
        keys = [gateway.open_episode(f"good-{i}") for i in range(8)]
        alone = [
            post(gateway.url, {"prompt": p, "return_token_ids": True}, k).json()
            for p, k in zip(prompts, keys)
        ]
        bad_key = gateway.open_episode("poisoned")
        # a row the checks cannot foresee, in the same batch: the model itself fails on it
        unforeseen = gateway.batcher.submit([gateway.vocab_size + 7], GREEDY)
        replies = [None] * 9

        def send(i):
            body = {"prompt": prompts[i], "return_token_ids": True} if i < 8 else {"prompt": [1000000000]}
            replies[i] = post(gateway.url, body, keys[i] if i < 8 else bad_key)

        threads = [threading.Thread(target=send, args=(i,)) for i in range(9)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with pytest.raises(IndexError):
            unforeseen.result(timeout=60)
        logs = [gateway.close_episode(k) for k in [*keys, bad_key]]
    assert [r.status_code for r in replies[:8]] == [200] * 8
    assert [r.json()["choices"][0]["token_ids"] for r in replies[:8]] == [
        a["choices"][0]["token_ids"] for a in alone
    ]
    assert replies[8].status_code == 400 and replies[8].json()["error"]["param"] == "prompt"
    assert "token id 1000000000" in replies[8].json()["error"]["message"]
    assert all(not log.errors for log in logs[:8]) and len(logs[8].errors) == 1 and not logs[8].calls


DEEP = "[" * 5000 + "]" * 5000
CHAT = "/v1/chat/completions"
USER = '"messages": [{"role": "user", "content": "Hi"}]'


def tool_turns(arguments):
    call = {"id": "c", "type": "function", "function": {"name": "search", "arguments": arguments}}
    turns = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    return {"messages": [*turns, {"role": "tool", "tool_call_id": "c", "content": "r"}]}


@pytest.mark.parametrize(
    "path, body, param, message",
    [
        (
            "/v1/completions",
            {"prompt": [49152]},
            "prompt",
            "prompt[0] is token id 49152; the model's ids are 0 to",
        ),
        ("/v1/completions", {"prompt": [5, -1]}, "prompt", "prompt[1] is token id -1"),
        (
            CHAT,
            "{" + USER + ', "temperature": NaN}',
            "temperature",
            "temperature is nan; send a finite number",
        ),
        (CHAT, "{" + USER + ', "top_p": Infinity}', "top_p", "top_p is inf"),
        (CHAT, "{" + USER + ', "temperature": "hot"}', "temperature", "temperature must be a finite number"),
        (CHAT, "{" + USER + ', "metadata": ' + DEEP + "}", "metadata", "metadata nests deeper than"),
        (CHAT, "{" + USER + ', "metadata": ' + "[" * 100 + "]" * 100 + "}", "metadata[0]", "nests deeper"),
        (CHAT, tool_turns(DEEP), "messages[1].tool_calls", "arguments nest too deep"),
        (CHAT, tool_turns("[" * 100 + "]" * 100), "messages[1]", f"deeper than {MAX_JSON_DEPTH} levels"),
        (
            CHAT,
            '{"messages": [{"role": "user", "content": "a\\ud800b"}]}',
            "messages[0].content",
            "lone surrogate",
        ),
        (
            CHAT,
            tool_turns('{"query": "\\udc00"}'),
            "messages[1].tool_calls.arguments.query",
            "lone surrogate",
        ),
        ("/v1/completions", '{"prompt": "a\\udc00"}', "prompt", "lone surrogate (\\udc00)"),
    ],
)
def test_input_the_model_or_tokenizer_cannot_take_is_refused_with_400_and_its_param(
    gateway, path, body, param, message
):
    response = post(gateway.url, body, "e", path)
    error = response.json()["error"]
    assert response.status_code == 400 and error["type"] == "invalid_request_error", error
    assert error["param"] == param and message in error["message"]
    log = gateway.close_episode("e")
    assert len(log.errors) == 1 and not log.calls


def send_chunked(url, headers, total, chunk=2**20):
    """POST ``total`` bytes of a JSON string in chunks, stopping once the server answers; the
    bytes sent and the status line."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        head = f"POST /v1/completions HTTP/1.1\r\nHost: {host}:{port}\r\n{headers}\r\n"
        s.sendall(head.encode())
        sent = 0
        try:
            while sent < total and not select.select([s], [], [], 0)[0]:
                data = b'{"prompt": "' + b"a" * (chunk - 12) if sent == 0 else b"a" * chunk
                s.sendall(b"%x\r\n%s\r\n" % (len(data), data) if "chunked" in headers else data)
                sent += len(data)
        except OSError:  # the server closed the connection after its answer
            pass
        return sent, s.recv(4096).split(b"\r\n")[0].decode()


def test_a_body_over_the_limit_is_refused_as_soon_as_the_count_passes_it(gateway):
    auth = "Authorization: Bearer k\r\nContent-Type: application/json\r\n"
    sent, status = send_chunked(gateway.url, auth + "Transfer-Encoding: chunked\r\n", 64 * 2**20)
    assert status.split()[1] == "413" and sent < MAX_BODY_BYTES + 16 * 2**20, (status, sent)
    sent, status = send_chunked(gateway.url, auth + f"Content-Length: {64 * 2**20}\r\n", 64 * 2**20)
    assert status.split()[1] == "413" and sent < 16 * 2**20, (status, sent)  # by its declared length
    assert not gateway.close_episode("k").calls


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_not_sent_as_json_is_refused_so_a_cross_site_form_cannot_post(gateway, content_type):
    body = json.dumps({"prompt": "hi", "max_tokens": 2})
    headers = {"Authorization": "Bearer k"} | ({"Content-Type": content_type} if content_type else {})
    response = httpx.post(gateway.url + "/v1/completions", content=body, headers=headers)
    assert (
        response.status_code == 415
        and "Content-Type: application/json" in response.json()["error"]["message"]
    )
    assert not gateway.close_episode("k").calls
    ok = post(gateway.url, body, **{"Content-Type": "application/json; charset=utf-8"})
    assert ok.status_code == 200


def test_the_gateway_it_serves_itself_answers_only_loopback_names(gateway):
    assert httpx.get(gateway.url + "/v1/models", headers={"Host": "attacker.example"}).status_code == 400
    assert httpx.get(gateway.url + "/v1/models").status_code == 200


def test_searchgym_gateway_bound_to_any_loopback_address_answers_only_loopback_names(
    tmp_path, tiny_llama_dir
):
    port = free_port()
    url = f"http://127.0.0.2:{port}"
    command = f"searchgym gateway --policy hf --model {tiny_llama_dir} --host 127.0.0.2 --port {port}"
    server = serve(command, tmp_path, url + "/health")
    try:
        assert httpx.get(url + "/v1/models", headers={"Host": "attacker.example"}).status_code == 400
        assert httpx.get(url + "/v1/models", headers={"Host": "localhost"}).status_code == 200
        assert httpx.get(url + "/v1/models").status_code == 200  # Host: 127.0.0.2:PORT
    finally:
        stop(server)
