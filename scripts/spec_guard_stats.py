#!/usr/bin/env python3
"""What adaptive speculation's decisions cost, from a debug server log.

`EMBER_LOG_LEVEL=debug ember serve ... --speculative-config '{..."enable_adaptive_verification":true}'`
logs every decode-only step the guard measured ("spec guard: 16-31 decodes speculating, 48 tokens
in 12.10 ms ..."). Per bucket of decoding requests and per mode (plain, speculating, and the
unmeasured first decision of an off bucket's exploring pair), this sums the steps, their time and
their tokens, and prices the speculating steps at the bucket's plain rate: the milliseconds they
took beyond what plain steps would have taken for the same tokens (negative: speculating saved).

  scripts/spec_guard_stats.py SERVER_LOG

What the log cannot show is left out: steps with a prefill in them, and drafting that no measured
step is charged (an exploring pair's catch-up); /metrics has the proposer's seconds for those.
"""

import collections
import re
import sys

STEP = re.compile(r"spec guard: (.+?) (speculating|plain), (\d+) tokens in ([\d.]+) ms( \(warm-up)?")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    steps, ms, tokens = collections.Counter(), collections.Counter(), collections.Counter()
    for line in open(sys.argv[1], errors="replace"):
        m = STEP.search(line)
        if m:
            key = (m.group(1), m.group(2) + (" (warm-up)" if m.group(5) else ""))
            steps[key] += 1
            ms[key] += float(m.group(4))
            tokens[key] += int(m.group(3))
    if not steps:
        raise SystemExit("no 'spec guard:' lines: run the server with EMBER_LOG_LEVEL=debug and adaptive speculation")
    total_ms = sum(ms.values())
    extra_total = 0.0
    print(f"{'bucket':<16} {'mode':<24} {'steps':>6} {'ms':>9} {'tok/s':>8} {'extra ms':>9}")
    for bucket, mode in sorted(steps, key=lambda k: (int(re.match(r"\d+", k[0]).group()), k[1])):
        key = (bucket, mode)
        rate = tokens[key] / ms[key] * 1e3
        extra = ""
        plain = (bucket, "plain")
        if mode != "plain" and plain in steps:
            plain_ms_per_token = ms[plain] / tokens[plain]
            e = ms[key] - tokens[key] * plain_ms_per_token
            extra_total += e
            extra = f"{e:9.1f}"
        print(f"{bucket:<16} {mode:<24} {steps[key]:>6} {ms[key]:>9.1f} {rate:>8.0f} {extra:>9}")
    print(f"decode-only steps: {total_ms:.0f} ms; speculating beyond the plain rate: {extra_total:+.1f} ms "
          f"({100 * extra_total / total_ms:+.2f}%)")


if __name__ == "__main__":
    main()
