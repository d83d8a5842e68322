"""Speed against the peers: vitprof, FlopCounterMode, fvcore, torchinfo and ptflops.

Each (peer, case) runs in a fresh subprocess with a timeout. The child reports the wall time
of building the model and of counting (imports excluded), its peak resident memory (VmHWM of
``/proc/self/status``) and that peak above the resident memory after importing torch,
torchvision and vitprof.models.zoo (the baseline, the same for every peer), and the MACs the peer
reports (FlopCounterMode reports FLOPs = 2 x MACs: halved here). Writes a markdown table: its
own section of the output file, whose other sections (benchmarks/startup.py's) are kept.

How each peer runs, as its documentation shows it:

* vitprof: ``vitprof.analyze(name, image_size=...)`` on the meta device (its default);
* FlopCounterMode: a forward of the model built on the meta device under the mode;
* fvcore ``FlopCountAnalysis``, torchinfo ``summary`` and ptflops ``get_model_complexity_info``
  (default backend) trace or hook a real forward: the model is built on the CPU with random
  weights and run once. fvcore cannot trace on meta (it fails on a data-dependent check), and
  ptflops and torchinfo report other numbers on meta than on the CPU, so they run as intended.

A case a peer cannot run says why in its cell: the 22B ViT needs 88 GB of float32 weights; a
forward of vit_h_14 at 518 (about a TMAC) takes minutes on a shared 2-core CPU, so the CPU peers
skip it unless ``--heavy`` is given.

    python benchmarks/peers_speed.py [--output reports/benchmark.md] [--timeout 600] [--heavy]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch
from machine import cpu_name
from sections import write_section

HEADING = "# Speed against the peers"
CASES = [("vit_b_16", 224), ("vit_h_14", 518), ("vit_22b", 224)]
PEERS = ["vitprof", "FlopCounterMode", "fvcore", "torchinfo", "ptflops"]
ON_META = {"vitprof", "FlopCounterMode"}
HEAVY = {("vit_h_14", 518)}
# Why each peer's MACs differ from vitprof's on CASES: the named causes of `vitprof crosscheck`
# (docs/crosscheck.md), at batch 1. ViT-B/16 at 224: N = 197 tokens, D = 768, MLP 3072, 12
# blocks and heads; ViT-H/14 at 518: N = 1370, D = 1280, MLP 5120, 32 blocks, 16 heads.
EXPLAINED = [
    "## Why the peers' MACs differ",
    "",
    "Each difference is the sum of the named causes of `vitprof crosscheck` (see "
    "[docs/crosscheck.md](../docs/crosscheck.md)), residual 0:",
    "",
    "- FlopCounterMode on meta: equal to vitprof (scaled_dot_product_attention decomposes into "
    "bmm there).",
    "- fvcore: it does not count `aten::scaled_dot_product_attention` (QK^T and AV) and counts "
    "LayerNorm as 5 flops per element. vit_b_16: -715,327,488 (12 x 2 x 197^2 x 768) "
    "+ 18,912,000 (25 x 197 x 768 x 5) = -696,415,488; vit_h_14 at 518: -153,755,648,000 "
    "(32 x 2 x 1370^2 x 1280) + 569,920,000 (65 x 1370 x 1280 x 5) = -153,185,728,000.",
    "- torchinfo 1.8.0: a Linear on (B, N, D) is charged B x weight, not B x N x weight; biases "
    "and LayerNorm parameters are charged B x params; `nn.MultiheadAttention` runs functionally "
    "and no rule sees it. vit_b_16: -11,098,128,384 ((1 - 197) x 768 x 3072 x 2 x 12) + 47,080 "
    "+ 150,528 + 38,400 - 6,292,703,232 = -17,390,595,608; vit_h_14 at 518: -574,200,217,600 "
    "((1 - 1370) x 1280 x 5120 x 2 x 32) + 205,800 (Linear biases) + 1,752,320 (convolution "
    "bias, 1369 x 1280) + 166,400 (65 LayerNorms x 2560) - 441,065,472,000 (32 x 1370 x 1280 x "
    "5120 projections + 153,755,648,000 attention) = -1,015,263,565,080.",
    "- ptflops 0.7.5 (pytorch backend): its module hooks count LayerNorm input elements, Linear "
    "and convolution bias elements, nn.GELU output elements and nn.MultiheadAttention's query "
    "scaling, biases and softmax as MACs, and its patched F.gelu counts GELU again. vit_b_16: "
    "3,782,400 (25 x 197 x 768) + 9,078,760 (12 x 197 x 3840 + 1000) + 150,528 (196 x 768) "
    "+ 7,262,208 (12 x 197 x 3072) + 14,666,256 (12 x (5 x 197 x 768 + 12 x 197^2)) "
    "+ 7,262,208 = +42,202,360; vit_h_14 at 518: 113,984,000 + 280,577,000 + 1,752,320 "
    "+ 224,460,800 + 1,241,548,800 (32 x (5 x 1370 x 1280 + 16 x 1370^2)) + 224,460,800 "
    "= +2,086,783,720.",
    "",
]

CHILD = r"""
import contextlib, io, json, logging, sys, time, warnings

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
    raise KeyError(key)

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)
peer, name, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
import torch, torchvision  # noqa: F401
from vitprof.models.zoo import build
baseline = status("VmRSS:")
start = time.perf_counter()
params = None
if peer == "vitprof":
    import vitprof
    profile = vitprof.analyze(name, image_size=size)
    built = start
    macs, params = profile.totals.macs, profile.totals.params
else:
    device = "meta" if peer == "FlopCounterMode" else "cpu"
    model = build(name, image_size=size, device=device).module.eval()
    x = torch.zeros(1, 3, size, size, device=device)
    built = time.perf_counter()
    if peer == "FlopCounterMode":
        from torch.utils.flop_counter import FlopCounterMode
        with FlopCounterMode(display=False) as counter:
            model(x)
        macs = counter.get_total_flops() // 2
    elif peer == "fvcore":
        from fvcore.nn import FlopCountAnalysis
        analysis = FlopCountAnalysis(model, x)
        analysis.unsupported_ops_warnings(False)
        analysis.uncalled_modules_warnings(False)
        macs = analysis.total()
    elif peer == "torchinfo":
        import torchinfo
        summary = torchinfo.summary(model, input_data=x, verbose=0, device="cpu")
        macs, params = summary.total_mult_adds, summary.total_params
    elif peer == "ptflops":
        from ptflops import get_model_complexity_info
        with contextlib.redirect_stdout(io.StringIO()):
            macs, params = get_model_complexity_info(
                model, (3, size, size), as_strings=False, print_per_layer_stat=False)
    else:
        raise SystemExit(f"unknown peer {peer}")
end = time.perf_counter()
print(json.dumps({"build_s": built - start, "count_s": end - built, "total_s": end - start,
                  "peak_rss": status("VmHWM:"), "baseline_rss": baseline, "macs": int(macs),
                  "params": None if params is None else int(params)}))
"""


def run_child(peer: str, name: str, size: int, timeout: int) -> dict[str, object]:
    """Run one peer on one case in a fresh process; a failure or timeout becomes a reason."""
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, peer, name, str(size)],
            capture_output=True, text=True, timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        return {"error": f"failed: {lines[-1][:160] if lines else f'exit {done.returncode}'}"}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - started
    return result


def memory_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def skip_reason(peer: str, case: tuple[str, int], counted: dict[str, object], heavy: bool) -> str:
    """Why a CPU peer does not run ``case``, or "" when it runs."""
    if peer in ON_META or "error" in counted:
        return ""
    params, macs = int(counted["params"]), int(counted["macs"])
    weights = params * 4
    if weights > 0.5 * memory_bytes():
        return (f"not run: needs a real forward with {weights / 1e9:.0f} GB of float32 weights "
                f"({params / 1e9:.1f}B params x 4 bytes); this machine has "
                f"{memory_bytes() / 1e9:.0f} GB")
    if case in HEAVY and not heavy:
        return (f"not run: a real CPU forward of {macs / 1e9:,.0f} GMACs with "
                f"{weights / 1e9:.1f} GB of weights takes minutes on this shared "
                f"{os.cpu_count()}-core CPU (--heavy to try)")
    return ""


def cell_row(peer: str, case: tuple[str, int], result: dict[str, object]) -> list[str]:
    name, size = case
    device = "meta" if peer in ON_META else "cpu"
    if "error" in result or "skip" in result:
        return [f"{name} @ {size}", peer, device, "", "", "", "", str(result.get("skip")
                                                                         or result["error"])]
    timing = f"{result['total_s']:.2f}"
    if peer != "vitprof":
        timing += f" ({result['build_s']:.2f} + {result['count_s']:.2f})"
    peak, baseline = int(result["peak_rss"]), int(result["baseline_rss"])
    return [f"{name} @ {size}", peer, device, timing, f"{peak / 2**20:,.0f}",
            f"{(peak - baseline) / 2**20:,.0f}", f"{int(result['macs']):,}", ""]


def machine_lines() -> list[str]:
    cpu = cpu_name()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return [
        f"- machine: {cpu}, {os.cpu_count()} cores, {memory_bytes() / 1e9:.0f} GB of memory; "
        f"load average at the start {load} (the cores are shared with other work)",
        f"- software: Python {platform.python_version()}, torch {torch.__version__}",
        f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="reports/benchmark.md")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per subprocess")
    parser.add_argument("--heavy", action="store_true",
                        help="also run the CPU peers on vit_h_14 at 518")
    args = parser.parse_args()
    header = machine_lines()
    rows = []
    for case in CASES:
        counted = run_child("vitprof", *case, args.timeout)
        for peer in PEERS:
            reason = skip_reason(peer, case, counted, args.heavy)
            if peer == "vitprof":
                result = counted
            elif reason:
                result = {"skip": reason}
            else:
                result = run_child(peer, *case, args.timeout)
            rows.append(cell_row(peer, case, result))
            print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    lines = [
        HEADING,
        "",
        "Generated by `python benchmarks/peers_speed.py`; every cell is one fresh process.",
        "",
        *header,
        "- wall s: building the model and counting, imports excluded; for the peers "
        "(build + count). vitprof's figure includes its build on meta.",
        "- peak RSS: VmHWM of the process; above baseline: less the resident memory after "
        "importing torch, torchvision and vitprof.models.zoo (before building the model).",
        "- MACs: as each tool reports them (FlopCounterMode's FLOPs halved). vitprof's "
        "convention: multiply-accumulates of matmul, linear, convolution and attention "
        "products; why the others differ is what `vitprof crosscheck` explains.",
        "",
        "| case | peer | device | wall s | peak RSS MiB | above baseline MiB | MACs reported "
        "| note |",
        "| :--- | :--- | :--- | ---: | ---: | ---: | ---: | :--- |",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
        *EXPLAINED,
    ]
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    write_section(output, HEADING, "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
