#!/usr/bin/env python3
"""scripts/serve-rss.py URL PID [N] — the memory of a `cadre serve` under a stream of tasks.

Submits N (default 6000) task-protocol tasks of ~210 bytes to the node at URL, 8 at a time
in blocks of 500, and prints the RSS (KiB, from /proc/PID/status) of its process PID before
and after each block. Start the node with a model that answers at once (a `scripted:` file).
"""
import concurrent.futures as cf
import json
import sys
import time
import urllib.request


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])
    return -1


def submit(url, i):
    body = json.dumps({"input": f"job {i} " + "x" * 200}).encode()
    req = urllib.request.Request(
        url + "/tasks", data=body, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(req) as r:
        return json.load(r)["task_id"]


def main():
    url, pid = sys.argv[1], int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 6000
    print("tasks rss_kib")
    print(0, rss(pid), flush=True)
    with cf.ThreadPoolExecutor(8) as ex:
        for start in range(0, n, 500):
            list(ex.map(lambda i: submit(url, i), range(start, min(start + 500, n))))
            time.sleep(1)  # let the last block's tasks end
            print(min(start + 500, n), rss(pid), flush=True)


if __name__ == "__main__":
    main()
