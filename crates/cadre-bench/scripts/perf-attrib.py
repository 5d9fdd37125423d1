#!/usr/bin/env python3
"""Attribute `perf script -F tid,ip,sym` samples (DWARF call graphs) to cadre's hot paths.

Usage: perf script -i perf.data -F tid,ip,sym > stacks.txt
       python3 perf-attrib.py stacks.txt

Prints, for each pattern, the share of samples whose stack contains a frame matching it
(inclusive), and the leaf (self) shares of the hottest symbols.
"""
import collections
import re
import sys

# (label, regex on a frame's symbol); inclusive shares, so rows overlap.
PATTERNS = [
    ("mock server (testkit/axum/hyper server)", r"axum::serve::handle_connection|cadre_testkit::server"),
    ("  server: responder decide", r"cadre_bench::responder"),
    ("  server: request JSON parse", r"cadre_testkit::server::handle.*|serde_json::de::from_slice"),
    ("HTTP client connection tasks (hyper client)", r"hyper::proto::h1::dispatch::Client|hyper_util::client::legacy::client::PoolClient|hyper::client::conn"),
    ("child jobs (ChildJob::run)", r"cadre_subagents::runtime::child_job::ChildJob::run"),
    ("engine run loop (parent + children)", r"cadre_engine::run_loop::run_inner"),
    ("  provider stream (cadre_llm http attempt)", r"cadre_llm::http::attempt"),
    ("  request body build (openai::request)", r"cadre_llm::openai::request::"),
    ("  request body serialize (serde_json::to_vec)", r"serde_json::ser::to_vec|serde_json::ser::to_writer"),
    ("  SSE decode (openai::stream / eventsource)", r"cadre_llm::openai::stream|eventsource_stream"),
    ("  messages clone (session.messages().to_vec())", r"clone<cadre_types::message::Message|to_vec<cadre_types::message::Message|<cadre_types::message::Message as core::clone::Clone>::clone"),
    ("  system prompt (system_prompt / section)", r"cadre_engine::run_loop::system_prompt|cadre_subagents::tools::context_ext::section"),
    ("  tool definitions (ToolRegistry::definitions)", r"cadre_tools::registry::ToolRegistry::definitions"),
    ("  tool dispatch (Dispatcher)", r"cadre_engine::dispatch::"),
    ("  task tool call (TaskTool::call)", r"cadre_subagents::tools::task::"),
    ("  spawn/create_child/prepare", r"SubagentRuntime>::(spawn|create_child|prepare|start)|cadre_subagents::runtime::.*(spawn|create_child|prepare|start)"),
    ("  child prompt/workspace (child_setup, Workspace::new)", r"cadre_subagents::runtime::child_setup::|cadre_tools::workspace::Workspace::new|read_agents_md"),
    ("  tracker", r"cadre_subagents::runtime::tracker::"),
    ("  events (ForwardSink / Emitter)", r"ForwardSink|cadre_engine::run_loop::Emitter"),
    ("  session push / persist", r"cadre_engine::session::Session::push|cadre_engine::session::Session::write"),
    ("  wait_outstanding / injections", r"wait_outstanding|take_injections|take_finished|pending_counts"),
    ("  tracing span enter/exit/new (self)", r"^(tracing::span::Span::(new|enter|exit|do_enter|do_exit|record)|<tracing::span::Span as core::ops::drop::Drop>|tracing_core::dispatcher::get_default|tracing_core::callsite)"),
    ("serde_json (all)", r"serde_json::"),
    ("malloc/free/realloc (all)", r"^(_int_malloc|_int_free|malloc|free|realloc|_int_realloc|cfree|__libc_malloc|__libc_free|malloc_consolidate|unlink_chunk|__memmove|__memcpy|__memset)"),
    ("kernel (all)", r"^\[k\]"),
    ("  tcp send (tcp_sendmsg)", r"^\[k\]tcp_sendmsg$"),
    ("  tcp recv (tcp_recvmsg)", r"^\[k\]tcp_recvmsg$"),
    ("  epoll", r"^\[k\].*epoll"),
    ("  futex (thread wake/park)", r"^\[k\].*futex"),
    ("  connect/accept", r"^\[k\](__sys_connect|__sys_accept4|inet_accept|tcp_v4_connect)$"),
    ("tokio park (idle)", r"tokio::runtime::scheduler::multi_thread::park|tokio::runtime::park"),
]


def samples(path):
    stack = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if stack:
                    yield stack
                stack = []
                continue
            if line.startswith("\t") or line.startswith(" " * 8):
                parts = line.strip().split(" ", 1)
                if len(parts) == 2:
                    addr, sym = parts
                    sym = sym.replace(" (inlined)", "")
                    # perf ends some user stacks with `ffffffffffffffff [unknown]`: not kernel.
                    if addr.startswith("ffffffff") and sym != "[unknown]":
                        sym = "[k]" + sym
                    stack.append(sym)
            # header lines (tid) are skipped
    if stack:
        yield stack


def main():
    regs = [(label, re.compile(rx)) for label, rx in PATTERNS]
    hits = collections.Counter()
    leaf = collections.Counter()
    total = 0
    for st in samples(sys.argv[1]):
        total += 1
        if st:
            leaf[st[0]] += 1
        for label, rx in regs:
            if any(rx.search(s) for s in st):
                hits[label] += 1
    print(f"samples: {total}")
    print("inclusive share of samples whose stack matches:")
    for label, _ in PATTERNS:
        print(f"  {100.0 * hits[label] / max(total, 1):6.2f}%  {label}")
    print("hottest leaf symbols (self):")
    for sym, c in leaf.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 25):
        print(f"  {100.0 * c / max(total, 1):6.2f}%  {sym[:150]}")


if __name__ == "__main__":
    main()
