"""A stand-in for the Anthropic Messages API, for checking `cadre mcp serve` with Claude Code
without a real model (see docs/mcp.md). Standard library only.

Usage: python3 anthropic_mock.py PORT
Then: ANTHROPIC_BASE_URL=http://127.0.0.1:PORT ANTHROPIC_API_KEY=dummy claude -p "..."

Every streamed /v1/messages request is answered by these rules:
- the last user message carries a tool result  -> text "cadre answered: <the result>";
- the request offers the tool mcp__cadre__task -> a tool_use of it (agent general-purpose);
- anything else (titles, summaries)            -> text "ok".
Each request is logged to stderr with the tools it offered.
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sse(event, data):
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def reply_blocks(body):
    messages = body.get("messages", [])
    last = messages[-1] if messages else {}
    content = last.get("content")
    if isinstance(content, list):
        for block in content:
            if block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list):
                    inner = "".join(b.get("text", "") for b in inner if isinstance(b, dict))
                return [{"type": "text", "text": f"cadre answered: {inner}"}]
    names = [t.get("name") for t in body.get("tools", [])]
    if "mcp__cadre__task" in names:
        return [{
            "type": "tool_use",
            "id": "toolu_cadre_1",
            "name": "mcp__cadre__task",
            "input": {
                "subagent_type": "general-purpose",
                "description": "hello",
                "prompt": "Say hello from cadre.",
            },
        }]
    return [{"type": "text", "text": "ok"}]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        tools = [t.get("name") for t in body.get("tools", [])]
        print(f"{self.path} model={body.get('model')} tools={tools}", file=sys.stderr, flush=True)
        if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(json.dumps({"input_tokens": 10}).encode())
            return
        blocks = reply_blocks(body)
        stop = "tool_use" if blocks[0]["type"] == "tool_use" else "end_turn"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        out = [sse("message_start", {"type": "message_start", "message": {
            "id": "msg_mock", "type": "message", "role": "assistant", "model": body.get("model", "mock"),
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1}}})]
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": {"type": "text", "text": ""}}))
                out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "text_delta", "text": b["text"]}}))
            else:
                out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": {"type": "tool_use", "id": b["id"],
                                                                         "name": b["name"], "input": {}}}))
                out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                       "delta": {"type": "input_json_delta",
                                                                 "partial_json": json.dumps(b["input"])}}))
            out.append(sse("content_block_stop", {"type": "content_block_stop", "index": i}))
        out.append(sse("message_delta", {"type": "message_delta",
                                         "delta": {"stop_reason": stop, "stop_sequence": None},
                                         "usage": {"output_tokens": 5}}))
        out.append(sse("message_stop", {"type": "message_stop"}))
        self.wfile.write(b"".join(out))


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
