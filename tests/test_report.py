"""Reports, figures, corrections, sweeps and ``vitprof report --check``.

Most tests read the committed ``reports/`` folder (fast); the ones that regenerate reports are
marked slow. Expected numbers are derived by the arithmetic written beside them.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from conftest import NO_FORMULA_WARNING, NOT_A_VIT_WARNING
from PIL import Image, PngImagePlugin

from vitprof.cli.main import main
from vitprof.core.errors import UserError
from vitprof.core.records import Component
from vitprof.models.closed_form import ViTSpec, closed_form
from vitprof.models.zoo import ZOO, Published
from vitprof.render import figures
from vitprof.study.corrections import Verdict, claims, notes
from vitprof.study.generate import (
    ALL_MODELS,
    MARKER,
    NAMED_PAGE_FILES,
    NOTE_MODELS,
    folder_pages,
    pages,
    write,
)
from vitprof.study.page_check import compare, normalize
from vitprof.study.page_inputs import scaling_sizes
from vitprof.study.pages.markdown import Page, stages
from vitprof.study.zoo_rows import matches
from vitprof.sweep import parse_values, sweep

CORRECT, WRONG = Verdict.CORRECT, Verdict.WRONG
REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports"
SEEDS = REPO.parent / "shared" / "seeds"

# torchvision vit_b_16 at 224 px, batch 1: N = 197 tokens, D = 768, M = 3072, 12 blocks
VIT_B_16_MACS = (
    196 * 768 * 768  # patch embedding: 115,605,504
    + 12 * (
        197 * 768 * 2304  # q, k, v: 348,585,984
        + 2 * 12 * 197 * 197 * 64  # QK^T and AV: 59,610,624
        + 197 * 768 * 768  # output projection: 116,195,328
        + 2 * 197 * 768 * 3072  # MLP: 929,562,624
    )
    + 768 * 1000  # head on the class token
)  # = 17,563,828,224
VIT_B_16_BLOCK_PARAMS = (
    2 * 2 * 768  # two LayerNorms
    + 768 * 2304 + 2304  # in_proj
    + 768 * 768 + 768  # out_proj
    + 768 * 3072 + 3072 + 3072 * 768 + 768  # MLP
)  # = 7,087,872


# ------------------------------------------------------------------------------- helpers


def tables(text: str) -> list[list[list[str]]]:
    """Every pipe table of a markdown text: rows of cells, header first, alignment row dropped."""
    found, current = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                current.append(cells)
        elif current:
            found.append(current)
            current = []
    return found


def number(cell: str) -> float | None:
    text = cell.replace(",", "").removesuffix("%")
    try:
        return float(text)
    except ValueError:
        return None


def summed_tables(text: str) -> tuple[int, int]:
    """Check every table with a ``total`` row (columns add up to it) and every table with a
    ``total MACs`` column (the MAC columns before it add up to it); how many of each."""
    vertical = horizontal = 0
    for table in tables(text):
        header, rows = table[0], table[1:]
        if rows and rows[-1][0] == "total":
            vertical += 1
            body = rows[:-1]
            for col in range(1, len(header)):
                values = [number(r[col]) for r in body]
                total = number(rows[-1][col])
                if total is None or any(v is None for v in values):
                    continue
                if rows[-1][col].endswith("%"):
                    assert sum(values) == pytest.approx(total, abs=0.01 * len(body) + 0.01)
                else:
                    assert sum(values) == total, (header[col], table)
        if "total MACs" in header:
            horizontal += 1
            at = header.index("total MACs")
            parts = [header.index(h) for h in ("attn_core MACs", "MLP MACs", "other MACs")]
            for row in rows:
                assert sum(number(row[i]) for i in parts) == number(row[at]), row
    return vertical, horizontal


def correction_rows() -> dict[str, dict[str, str]]:
    text = (REPORTS / "corrections.md").read_text()
    rows = {}
    for table in tables(text):
        header = table[0]
        for row in table[1:]:
            rows[row[0]] = dict(zip(header, row, strict=True))
    return rows


# ------------------------------------------------------------------------------- committed reports


def test_reports_folder_has_every_page() -> None:
    names = {p.name for p in REPORTS.glob("*.md") if p.read_text().startswith(MARKER)}
    expected = {f"{m}.md" for m in (*ALL_MODELS, *NOTE_MODELS)} | {
        "zoo.md", "corrections.md", "published_figures.md", "README.md"}
    named = {name for name in NAMED_PAGE_FILES if name.endswith(".md")}  # timm_published.md
    assert names == expected | named


@pytest.mark.parametrize("model", ALL_MODELS)
def test_model_report_tables_sum_to_their_totals(model: str) -> None:
    text = (REPORTS / f"{model}.md").read_text()
    # stage, component, one block, every block; and the image-size table
    assert summed_tables(text) == (4, 1)


@pytest.mark.parametrize("model", ALL_MODELS)
def test_model_report_states_its_conventions(model: str) -> None:
    text = (REPORTS / f"{model}.md").read_text()
    for needed in ("FLOPs = 2 x MACs", "input: batch 1, 3x224x224", "device meta", "torch ",
                   "attention: fused scaled_dot_product_attention", "vector FLOPs"):
        assert needed in text
    assert "## Cross-check with other counters" in text
    assert "| fvcore |" in text and "| torchinfo |" in text


def test_vit_b_16_report_numbers() -> None:
    text = (REPORTS / "vit_b_16.md").read_text()
    assert f"- MACs: {VIT_B_16_MACS:,} (17.564 GMACs)" in text
    assert f"| encoder: 12 blocks | {12 * VIT_B_16_BLOCK_PARAMS:,} |" in text
    # the attention core overtakes the MLP at N* = M = 3072 tokens: 3071 patches of 16 px
    assert "N* = 3,072.0 tokens (3,071.0 patches, an image side of " \
        f"{16 * math.sqrt(3071):.1f} px)" in text


def test_every_figure_is_linked_and_every_link_exists() -> None:
    linked = set()
    for page in REPORTS.glob("*.md"):
        for target in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", page.read_text()):
            assert not Path(target).is_absolute() and "/" not in target
            assert (REPORTS / target).is_file(), target
            linked.add(target)
    drawn = {p.name for p in REPORTS.glob("*.png") if figures.read_digest(p) is not None}
    assert linked == drawn
    # two figures per torchvision page (their blocks are equal: no per-block figure), three
    # per note model page (blocks that differ), zoo.png, corrections' two and each named
    # page's own (timm_published.png), memory.md's timeline (memory_timeline.png, drawn by
    # benchmarks/memory_accuracy.py, which writes that page), and distributed_memory.md's per-rank
    # peak against world size of its two models (benchmarks/distributed_memory.py's figure models)
    named = {name for name in NAMED_PAGE_FILES if name.endswith(".png")}
    world_sizes = {"distributed_memory_world_size_timm_vit_giant_patch14_224.png",
                   "distributed_memory_world_size_vit_22b.png"}
    assert world_sizes <= linked
    assert len(linked) == (2 * len(ALL_MODELS) + 3 * len(NOTE_MODELS) + 1 + 2 + len(named) + 1
                           + len(world_sizes))


def test_the_index_lists_every_page() -> None:
    # every markdown page of the folder, whoever writes it, and nothing that is not there
    index = (REPORTS / "README.md").read_text()
    linked = set(re.findall(r"\]\(([^)]+\.md)\)", index))
    pages = {p.name for p in REPORTS.glob("*.md")} - {"README.md"}
    assert linked == pages
    assert {"timm_published.md", "zoo_sweep.md", "benchmark.md"} <= linked


def peer_notes(page: str, peer: str) -> str:
    """The bullets under ``**peer**`` in the cross-check section of a model page."""
    text = (REPORTS / page).read_text()
    return text.split(f"**{peer}**\n", 1)[1].split("\n**", 1)[0]


@pytest.mark.parametrize("peer", ["fvcore", "flopcounter-cpu", "ptflops-aten", "calflops"])
def test_peers_that_a_no_grad_run_blinds_say_so(peer: str) -> None:
    # vit_b_16's nn.MultiheadAttention modules: 12 x (4 x 197 x 768^2 + 2 x 197^2 x 768)
    hidden = 12 * (4 * 197 * 768**2 + 2 * 197**2 * 768)  # 6,292,703,232 MACs
    assert hidden == 6_292_703_232
    notes = peer_notes("vit_b_16.md", peer)
    assert "run in eval mode, grad enabled" in notes
    assert f"under torch.no_grad() the nn.MultiheadAttention fast path hides all {hidden:,} " \
        f"MACs of its modules from {peer}" in notes


def test_flopcounter_on_meta_has_no_fast_path_note() -> None:
    assert "no_grad" not in peer_notes("vit_b_16.md", "flopcounter-meta")


def test_the_dynamic_vit_page_says_what_the_model_is() -> None:
    text = (REPORTS / "note002_dynamic_vit.md").read_text()
    about = text.split("## About this model\n", 1)[1].split("\n## ", 1)[0]
    ratios = (1.0, 1.0, 0.7, 0.7, 0.49, 0.49)
    assert "The keep ratios, of the 64 patch tokens before each block, are " \
        "1, 1, 0.7, 0.7, 0.49, 0.49" in about
    # 1 + int(64 r): 65, 65, 45 (44.8), 45, 32 (31.36), 32 tokens
    assert "the blocks see 65, 65, 45, 45, 32, 32 tokens" in about
    assert "vitprof's assumptions" in about and "(blocks 2, 4)" in about
    # the whole model's crossover: N* = M sum(r) / sum(r^2) = 2048 x 4.38 / 3.4602
    crossover = 2048 * sum(ratios) / sum(r * r for r in ratios)
    assert f"= {crossover:,.1f} input tokens" in about  # 2,592.4
    assert "N* = M = 2048 is per block" in about
    # and the closed form's sentence beside the measured crossover says the same
    assert "That N* is per block" in text.split("## Cost against image size", 1)[1]


def test_reports_stay_small() -> None:
    # 2 MB of pages and figures, and half a megabyte for the zoo sweep's CSV, whose per-rule
    # placements of 738 models (about 0.5 MB) the next sweep's --baseline compares against
    assert sum(p.stat().st_size for p in REPORTS.iterdir()) < 2_500_000


def test_zoo_table_lists_every_model() -> None:
    text = (REPORTS / "zoo.md").read_text()
    (table,) = tables(text)
    assert [row[0] for row in table[1:]] == list(ZOO)
    for row in table[1:]:
        if row[0] in ALL_MODELS:
            assert row[-1].startswith("yes"), row


@pytest.mark.parametrize(
    ("published", "verdict"),
    [
        pytest.param(Published("p", 86_567_656, 17.564), True, id="same"),
        pytest.param(Published("p", 86_567_657, 17.564), False, id="params-off-by-one"),
        pytest.param(Published("p", 86_567_656, 17.563), False, id="gmacs-truncated"),
        pytest.param(Published("p", 86_567_656, 17.56), True, id="two-decimals"),
    ],
)
def test_published_figures_match_at_their_precision(published: Published, verdict: bool) -> None:
    assert matches(published, 86_567_656, VIT_B_16_MACS) is verdict


# ------------------------------------------------------------------------------- corrections


def test_every_claim_has_a_row_and_a_verdict() -> None:
    rows = correction_rows()
    assert set(rows) == {c.id for c in claims()}
    allowed = re.compile(r"correct|wrong|misleading|declared approximation|correct only for .+")
    assert all(allowed.fullmatch(r["verdict"]) for r in rows.values())
    assert all(f"**{c.id}** (" in (REPORTS / "corrections.md").read_text() for c in claims())


@pytest.mark.parametrize(
    ("claim", "note_value", "vitprof", "verdict"),
    [
        # note 000: 56.55M "FLOPs" and "Mult-Adds", against 2 x MACs and the MACs
        pytest.param("000-3", "56,550,000", f"{2 * VIT_B_16_MACS:,}", WRONG, id="000-flops"),
        pytest.param("000-4", "56,550,000", f"{VIT_B_16_MACS:,}", WRONG, id="000-macs"),
        # class token 768 + position embedding 197 x 768 = 152,064
        pytest.param("000-14", "151,776", f"{768 + 197 * 768:,}", WRONG, id="000-tokens"),
        # per-block MLP MACs 2 x 197 x 768 x 3072; attention 4 x 197 x 768^2 + 2 x 12 x 197^2 x 64
        pytest.param("000-22", "4,700,000", f"{2 * 197 * 768 * 3072:,}", WRONG, id="000-mlp"),
        pytest.param("000-23", "2,360,000", f"{4 * 197 * 768 * 768 + 2 * 12 * 197**2 * 64:,}",
                     WRONG, id="000-mha"),
        # note 001: vit_b_16 minus its head (768,000) plus 768 x 768 + 768 x 10 on one token
        pytest.param("001-13", "173,060,000", f"{VIT_B_16_MACS - 768_000 + 768 * 768 + 768 * 10:,}",
                     WRONG, id="001-torchinfo"),
        # note 002: 6 blocks of 4 (512^2 + 512) + 512 x 2048 + 2048 + 2048 x 512 + 512 + 2 x 1024
        pytest.param("002-8", "8,000,000",
                      f"{6 * (4 * (512**2 + 512) + 512 * 2048 + 2048 + 2048 * 512 + 512 + 2048):,}",
                      WRONG, id="002-blocks"),
        # ... plus conv 3 x 16 x 512 + 512, CLS 512 + 65 x 512, final LN 1024, head 5130
        pytest.param("002-10", "8,500,000", f"{18_914_304 + 25_088 + 33_792 + 1_024 + 5_130:,}",
                     WRONG, id="002-total"),
        # note 004's bias-free tally: qkv right for its own code, the others miss a bias
        pytest.param("004-6", "1,769,472", f"{768 * 2304 + 2304:,}",
                     "correct only for its own code (qkv_bias=False)", id="004-qkv"),
        pytest.param("004-7", "589,824", f"{768 * 768 + 768:,}", WRONG, id="004-proj"),
        pytest.param("004-8", "2,359,296", f"{768 * 3072 + 3072:,}", WRONG, id="004-fc1"),
        pytest.param("004-9", "2,359,296", f"{3072 * 768 + 768:,}", WRONG, id="004-fc2"),
        pytest.param("004-14", "768,000", f"{768 * 1000 + 1000:,}", WRONG, id="004-head"),
        pytest.param("004-5", "151,296", f"{197 * 768:,}", CORRECT, id="004-pos"),
    ],
)
def test_corrections_spot_values(claim: str, note_value: str, vitprof: str, verdict: str) -> None:
    row = correction_rows()[claim]
    assert (row["note's value"], row["vitprof"], row["verdict"]) == (note_value, vitprof, verdict)


def test_corrections_name_the_real_meaning_of_notes_figures() -> None:
    text = (REPORTS / "corrections.md").read_text()
    # 000's 4.70M / 2.36M are the MLP's and the attention's parameter counts
    assert f"the MLP has {768 * 3072 + 3072 + 3072 * 768 + 768:,} parameters" in text
    assert f"the attention has {768 * 2304 + 2304 + 768 * 768 + 768:,} parameters" in text
    # 001's 173.06M: conv 590,592 x 196 positions + the other leaves' params once each
    assert f"= {590_592 * 196:,}, plus" in text and "173,061,898 = torchinfo's figure" in text


def test_claims_are_well_formed() -> None:
    ids = [c.id for c in claims()]
    assert len(ids) == len(set(ids))
    assert {i.split("-")[0] for i in ids} == set(notes())
    for claim in claims():
        assert (claim.value is None) == (claim.judge is not None), claim.id
        assert re.search(r"lines? \d+", claim.where), claim.id


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the source notes are not checked out beside")
def test_quotes_are_verbatim_and_where_they_say() -> None:
    for claim in claims():
        lines = (SEEDS / claim.note.file).read_text().splitlines()
        numbers = [int(x) for x in re.findall(r"\d+", claim.where.rpartition("line")[2])]
        span = set(range(min(numbers), max(numbers) + 1)) | set(numbers)
        for quote in claim.quote:
            found = {i + 1 for i, line in enumerate(lines) if quote in line}
            assert found & span, (claim.id, quote, found)


# ------------------------------------------------------------------------------- markdown pieces


def test_stages_of_vit_b_16_add_up() -> None:
    from vitprof import analyze

    profile = analyze("vit_b_16")
    got = {name: (c.params, c.macs) for name, c in stages(profile)}
    assert got == {
        "patch embedding": (3 * 16 * 16 * 768 + 768, 196 * 768 * 768),
        "tokens (class token, position embedding)": (768 + 197 * 768, 0),
        "encoder: 12 blocks": (12 * VIT_B_16_BLOCK_PARAMS, VIT_B_16_MACS - 196 * 768 * 768
                               - 768 * 1000),
        "encoder: final norm": (2 * 768, 0),
        "head": (768 * 1000 + 1000, 768 * 1000),
    }
    sizes = scaling_sizes(profile, 16)
    assert sizes[0] == 224 and all(s % 16 == 0 for s in sizes)
    assert sizes[-1] > 16 * math.sqrt(3071)  # past the crossover, 3071 patches


# ------------------------------------------------------------------------------- figures


def test_figures_are_deterministic_and_carry_their_digest(tmp_path: Path) -> None:
    data = figures.FigureData("blocks", "t", {"blocks": [0, 1], "series": {"mlp": [3, 4]}})
    figures.save(data, tmp_path / "a.png")
    figures.save(data, tmp_path / "b.png")
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    assert figures.read_digest(tmp_path / "a.png") == data.digest
    other = figures.FigureData("blocks", "t", {"blocks": [0, 1], "series": {"mlp": [3, 5]}})
    assert other.digest != data.digest


# ------------------------------------------------------------------------------- sweeps


def test_crossover_of_vit_b_16_is_at_m_tokens() -> None:
    # per block, core 2 N^2 D = MLP 2 N D M at N = M = 3072 tokens = 3071 patches + CLS
    found = sweep("vit_b_16", "image_size", [672, 896], progress=False).crossover()
    assert found is not None
    assert (found.tokens, found.patches, found.first_swept) == (3072, 3071, 896)
    assert found.image_size == pytest.approx(16 * math.sqrt(3071))


def test_linear_attention_never_overtakes_the_mlp() -> None:
    assert sweep("note002_linear_attention", "image_size", [32, 64], progress=False
                 ).crossover() is None


def test_depth_and_width_sweeps_rebuild_the_model() -> None:
    depth = sweep("vit_b_16", "depth", [6, 12], progress=False)
    params = [p.totals.params for p in depth.points]
    assert params[1] - params[0] == 6 * VIT_B_16_BLOCK_PARAMS
    width = sweep("vit_b_16", "width", [384], progress=False)
    block = 2 * 2 * 384 + 384 * 1152 + 1152 + 384 * 384 + 384 + 2 * 384 * 1536 + 1536 + 384
    # patch conv + tokens + 12 blocks + final LayerNorm + head, heads 384 / 64 = 6, MLP 4 x 384
    expected = (3 * 256 * 384 + 384) + 198 * 384 + 12 * block + 2 * 384 + 384 * 1000 + 1000
    assert width.points[0].totals.params == expected
    # 12 blocks of QK^T and AV over 6 heads of width 64
    assert width.points[0].components[Component.ATTN_CORE].macs == 12 * 2 * 6 * 197**2 * 64


def test_sweep_values_are_checked() -> None:
    assert parse_values("224, 384,518") == [224, 384, 518]
    for bad in ("224,x", "0,224", "224,224"):
        with pytest.raises(UserError):
            parse_values(bad)


def test_sweep_shows_every_warning(odd_models: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", f"{odd_models}:odd", "--image-size", "16,32", "--format", "json"]) == 0
    captured = capsys.readouterr()
    warnings = json.loads(captured.out)["warnings"]
    assert NO_FORMULA_WARNING in warnings
    assert any(w.startswith(NOT_A_VIT_WARNING) for w in warnings)
    # each warning once on stderr, though both points raise it
    assert captured.err.splitlines() == [f"vitprof: warning: {w}" for w in warnings]


SWEEP_ERRORS = [
    pytest.param(["vit_b_16", "--image-size", "224,518"],
                 "building vit_b_16 at image size 518 failed: AssertionError: Input shape "
                 "indivisible by patch size!", id="size"),
    pytest.param(["note002_cifar_vit", "--depth", "6,12"],
                 "--depth sweeps rebuild torchvision and timm ViTs", id="depth-unsupported"),
    pytest.param(["vit_b_16", "--width", "384,700"],
                 "width 700 is not a multiple of the head width 64", id="width"),
    pytest.param(["vit_b_16", "--image-size", "224,big"], "expected comma-separated integers",
                 id="not-a-number"),
    pytest.param(["no_such_model", "--image-size", "224"], "unknown model 'no_such_model'",
                 id="unknown-model"),
]


@pytest.mark.parametrize(("argv", "message"), SWEEP_ERRORS)
def test_sweep_user_errors_are_one_line(argv: list[str], message: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vitprof: error: ") and message in err and err.count("\n") == 1


def test_sweep_prints_a_table_and_writes_the_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", "vit_b_32", "--image-size", "224,448", "--format", "markdown",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    (table,) = tables(out)
    # 224 px: 49 patches of 32 px; 448 px: 196
    assert [(r[0], r[1]) for r in table[1:]] == [("224", "49"), ("448", "196")]
    assert summed_tables(out) == (0, 1)
    assert figures.read_digest(tmp_path / "vit_b_32_image_size_sweep.png") is not None


def test_sweep_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["sweep", "vit_b_16", "--depth", "1,2", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["value"] for p in data["points"]] == [1, 2]
    mlp = [p["components"]["mlp"]["macs"] for p in data["points"]]
    assert mlp == [2 * 197 * 768 * 3072, 2 * 2 * 197 * 768 * 3072]  # one block, then two
    assert data["crossover"] is None and data["units"]["flops"] == "2 x macs"


# ------------------------------------------------------------------------------- the check


@pytest.fixture
def copies(tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of the committed reports: a stand-in fresh generation and one to tamper."""
    fresh, kept = tmp_path / "fresh", tmp_path / "kept"
    shutil.copytree(REPORTS, fresh)
    shutil.copytree(REPORTS, kept)
    return fresh, kept


def test_compare_accepts_identical_folders_and_another_torch(copies: tuple[Path, Path]) -> None:
    fresh, kept = copies
    page = kept / "vit_b_16.md"
    page.write_text(re.sub(r"torch \S+;", "torch 2.14.1+cpu;", page.read_text()))
    assert compare(fresh, kept) == []
    assert normalize("torch 2.14.1+cu130; x") == "torch <version>; x"


def test_compare_finds_every_kind_of_tampering(copies: tuple[Path, Path]) -> None:
    fresh, kept = copies
    page = kept / "vit_b_32.md"
    page.write_text(page.read_text().replace("88,224,232", "88,224,233", 1))
    shutil.copy(kept / "vit_b_32_scaling.png", kept / "vit_b_32_components.png")
    with Image.open(fresh / "vit_l_16_scaling.png") as image:  # same data, other pixels
        info = PngImagePlugin.PngInfo()
        info.add_text(figures.DIGEST_KEY, image.info[figures.DIGEST_KEY])
        image.resize((image.width // 2, image.height // 2)).save(kept / "vit_l_16_scaling.png",
                                                                 pnginfo=info)
    (kept / "vit_h_14_scaling.png").unlink()
    (kept / "old.md").write_text(MARKER + "# stale\n")
    (kept / "notes.md").write_text("# someone else's file\n")
    problems = "\n".join(compare(fresh, kept))
    assert "vit_b_32.md differs" in problems and "88,224,233" in problems
    assert "vit_b_32_components.png plots other data" in problems
    assert "vit_l_16_scaling.png is 450x200 px" in problems  # 9 x 4 in at 100 dpi, halved
    assert "vit_h_14_scaling.png is missing" in problems
    assert "old.md is not generated any more" in problems
    assert "notes.md" not in problems


REPORT_ERRORS = [
    pytest.param(["report", "no_such_model", "--out", "{tmp}"], "unknown model", id="model"),
    pytest.param(["report", "--out", "{tmp}"], "name at least one model, or use --all",
                 id="nothing"),
    pytest.param(["report", "timm-published", "--in-chans", "1", "--out", "{tmp}"],
                 "timm-published is counted at its own sizes, recognizer auto: the options "
                 "(--in-chans) apply to model pages only", id="input-with-timm-published"),
    pytest.param(["report", "timm-published", "--recognizer", "graph", "--out", "{tmp}"],
                 "timm-published is counted at its own sizes, recognizer auto: the options "
                 "(--recognizer) apply to model pages only", id="recognizer-with-timm-published"),
]

TINY_VIT_PY = """
from vitprof.models.closed_form import ViTSpec
from vitprof.models.reference import ReferenceViT


def tiny(image_size=16, in_chans=3):
    return ReferenceViT(ViTSpec(image_size, 4, 16, 1, 2, 32, num_classes=3, in_chans=in_chans))
"""


def _tiny_page(tmp_path: Path, options: list[str]) -> str:
    """The page of a one-block ViT (patch 4, width 16) written with ``options``."""
    source = tmp_path / "tiny_vit.py"
    source.write_text(TINY_VIT_PY)
    out = tmp_path / "reports"
    assert main(["report", f"{source}:tiny", *options, "--out", str(out)]) == 0
    (page,) = out.glob("*.md")
    return page.read_text()


def test_report_analyses_a_model_page_at_the_input_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = _tiny_page(tmp_path, ["--image-size", "16x24", "--dtype", "bfloat16"])
    assert "- input: batch 1, 3x16x24 (args[0] 1x3x16x24 bfloat16)" in text
    form = closed_form(ViTSpec((16, 24), 4, 16, 1, 2, 32, num_classes=3))  # 4 x 6 patches
    assert f"- MACs: {form.totals.macs:,} " in text
    # the sweep holds the dtype and sweeps square sizes from the width analysed, 24 px: its
    # first point is the 24 x 24 image (6 x 6 patches), not the 16 x 24 one analysed above
    sweep = text[text.index("## Cost against image size"):]
    square = closed_form(ViTSpec(24, 4, 16, 1, 2, 32, num_classes=3)).totals.macs
    (row,) = [line for line in sweep.splitlines() if line.startswith("| 24 | 36 |")]
    assert row.split(" | ")[-2] == f"{square:,}"  # the total MACs column
    text = _tiny_page(tmp_path, ["--input-shape", "2,1,16,24"])
    assert "- input: batch 2, 1x16x24" in text
    form = closed_form(ViTSpec((16, 24), 4, 16, 1, 2, 32, num_classes=3, in_chans=1), 2)
    assert f"- MACs: {form.totals.macs:,} " in text
    assert ("## Cost against image size\n\nNot swept: the whole input shape was given "
            "(--input-shape fixes every size).") in text


def test_report_breaks_a_model_page_down_with_the_recognizer_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the header names who made the breakdown, as analyze's does: "graph" for the graph
    # recognizer, else a family table (none detects this one: the graph); the totals do not
    # depend on it
    form = closed_form(ViTSpec(16, 4, 16, 1, 2, 32, num_classes=3))  # 4 x 4 patches
    for recognizer, family in (("graph", "graph"), ("tables", "graph")):
        (tmp_path / recognizer).mkdir()
        text = _tiny_page(tmp_path / recognizer, ["--recognizer", recognizer])
        header = next(line for line in text.splitlines() if line.startswith("- model: "))
        assert header.endswith(f"(recognized as {family})")
        assert f"- MACs: {form.totals.macs:,} " in text


@pytest.mark.parametrize(("argv", "message"), REPORT_ERRORS)
def test_report_user_errors(argv: list[str], message: str, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vitprof: error: ") and message in err and err.count("\n") == 1


def test_report_shows_every_warning_on_stderr_and_on_the_page(
    odd_models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "reports"
    assert main(["report", f"{odd_models}:odd", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    (page,) = out.glob("*.md")
    text = page.read_text()
    section = text[text.index("## Warnings"):text.index("## Totals")]
    for warning in (NO_FORMULA_WARNING, NOT_A_VIT_WARNING):
        assert f"- {warning}" in section
        assert f"vitprof: warning: {page.name}: {warning}" in err


def test_a_page_that_cannot_be_written_is_one_user_error(tmp_path: Path) -> None:
    (tmp_path / "a.md").mkdir()  # a folder where the page should go
    with pytest.raises(UserError, match=r"cannot write .*a\.md: Is a directory"):
        write([Page("a.md", "# a\n")], tmp_path)


def test_check_of_a_missing_folder_fails(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--check", "--out", str(tmp_path / "none")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_check_fails_after_tampering(tmp_path: Path, odd_models: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    # a small model's page (a conv and a Fourier transform: its peers run in a moment), written,
    # checked, then edited and one of its figures deleted
    kept, model = tmp_path / "reports", f"{odd_models}:odd"
    assert main(["report", model, "--out", str(kept)]) == 0
    assert main(["report", model, "--check", "--out", str(kept)]) == 0
    (page,) = kept.glob("*.md")
    page.write_text(page.read_text().replace("## Totals", "## Totals (edited)", 1))
    figure = next(kept.glob("*_components.png"))
    figure.unlink()
    capsys.readouterr()
    assert main(["report", model, "--check", "--out", str(kept)]) == 1
    err = capsys.readouterr().err
    assert f"{page.name} differs" in err and f"{figure.name} is missing" in err


# The model pages whose cross-checks every run makes anyway (tests/test_crosscheck.py, shared
# through pages_reuse_crosschecks). The other three cross-check vit_l_16, vit_l_32 and vit_h_14
# (their peers' CPU forwards: minutes, and 4 GB of memory for vit_h_14's 2.5 GB of weights).
SHARED_PAGES = ("vit_b_16", "vit_b_32", "note002_dynamic_vit")


@pytest.mark.slow
@pytest.mark.usefixtures("pages_reuse_crosschecks")
def test_committed_pages_are_up_to_date(tmp_path: Path) -> None:
    """The twin of test_committed_reports_are_up_to_date in every run: the pages of
    SHARED_PAGES, the zoo, corrections and index pages, regenerated and compared as
    ``report --check`` compares them (CI runs ``vitprof report --check`` on all of them)."""
    write([*pages(SHARED_PAGES), *folder_pages([*ALL_MODELS, *NOTE_MODELS])], tmp_path)
    assert compare(tmp_path, REPORTS, stale=False) == []


@pytest.mark.slow
@pytest.mark.exhaustive
@pytest.mark.usefixtures("pages_reuse_crosschecks")
def test_committed_reports_are_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--check", "--out", str(REPORTS)]) == 0, capsys.readouterr().err
