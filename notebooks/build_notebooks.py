"""Generate the notebooks of ``notebooks/`` from this script (outputs cleared, ready to commit).

    python notebooks/build_notebooks.py            # rewrite notebooks/*.ipynb
    python notebooks/build_notebooks.py --check    # exit 1 if a notebook differs from this script

One notebook per experiment. Each imports the package (no model code of its own), reads the
committed JSON records from ``results/`` with ``thesis_repro.records.load_records``, renders the
tables and figures inline with the experiment module's render functions, and can train the
module's ``smoke`` preset live into a temporary directory. The first code cell (tagged
``parameters``) holds ``RUN_SMOKE`` and ``SMOKE_DIR``; ``tests/test_notebooks.py`` inserts its
own values after it and executes every notebook headless.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def md(text: str) -> nbformat.NotebookNode:
    """A Markdown cell from an indented triple-quoted string."""
    return new_markdown_cell(textwrap.dedent(text).strip())


def code(text: str, tags: tuple[str, ...] = ()) -> nbformat.NotebookNode:
    """A code cell from an indented triple-quoted string."""
    metadata = {"tags": list(tags)} if tags else {}
    return new_code_cell(textwrap.dedent(text).strip(), metadata=metadata)


def parameters() -> nbformat.NotebookNode:
    return code(
        """
        # Parameters (tests/test_notebooks.py inserts its own values after this cell).
        RUN_SMOKE = True  # train the `smoke` preset live into SMOKE_DIR (a minute or so on a CPU)
        SMOKE_DIR = None  # where the smoke run writes its records; None: a new temporary folder
        """,
        tags=("parameters",),
    )


FIND_ROOT = """
# The repository root, whether the notebook was started from notebooks/ or from the root.
here = Path.cwd()
ROOT = next((p for p in [here, *here.parents] if (p / "pyproject.toml").exists()), here)
"""


def setup(module: str, loader: str = "load_records") -> nbformat.NotebookNode:
    """Imports (``module`` and the records ``loader``), the repository root, a scratch folder
    for inline figures, and ``show``."""
    return code(
        f"""
        import tempfile
        from pathlib import Path

        from IPython.display import Image, Markdown, display

        from thesis_repro import {module}
        from thesis_repro.records import {loader}
        {textwrap.indent(FIND_ROOT, " " * 8)}
        RESULTS = ROOT / "results"  # the committed records: only read here
        SCRATCH = Path(tempfile.mkdtemp(prefix="thesis_repro_notebook_"))  # inline figures
        SMOKE = Path(SMOKE_DIR) if SMOKE_DIR else SCRATCH / "results"


        def show(path):
            \"\"\"Show a figure written by a render function (None: nothing to plot).\"\"\"
            if path is None:
                print("(no records to plot)")
            else:
                display(Image(filename=str(path)))
        """
    )


def presets(module: str) -> list[nbformat.NotebookNode]:
    return [
        md(f"## Presets\n\nEach preset is data in `{module}.PRESETS`."),
        code(
            f"""
            for name, preset in {module}.PRESETS.items():
                print(f"{{name}}: {{preset.description}}\\n")
            """
        ),
    ]


SMOKE_INTRO = md(
    """
    ## Live: the `smoke` preset

    The next cell trains the `smoke` preset into a temporary folder (`SMOKE`) and renders it as
    above. Its runs are far too short to mean anything; they show that the whole chain runs:
    task → model → training → JSON records → table and figure. Finished runs are skipped, so
    running the cell again takes seconds. Set `RUN_SMOKE = False` at the top to skip it.
    """
)


def ffattention_cells() -> list[nbformat.NotebookNode]:
    return [
        md(
            """
            # Raffel & Ellis (2015): feed-forward attention on long-term memory problems

            C. Raffel and D. P. W. Ellis, *Feed-forward networks with attention can solve some
            long-term memory problems*, arXiv:1512.08756 (ICLR 2016 workshop).
            What is reproduced (module `thesis_repro.ffattention`):

            - **Model (§2.1):** `h_t = LReLU(W_xh x_t + b_xh)` with D = 100; the context `c` is
              feed-forward attention (eq. 1: `e_t = tanh(W_hc h_t + b_hc)`, `α = softmax(e)`,
              `c = Σ α_t h_t`, `thesis_repro.layers.AttentionPooling`) or the unweighted mean
              (eq. 2); then `s = LReLU(W_cs c + b_cs)` and `y = LReLU(W_sy s + b_sy)`
              (`thesis_repro.ffattention.model.raffel_model`).
            - **Fixed length (§2.2, Table 1):** the addition and multiplication problems with
              lengths in [T0, 1.1 T0]; Adam, minibatches of 100, epochs of 1000 updates; epochs
              to 100% test accuracy (|error| < 0.04), best over learning rates.
            - **Variable length (§2.3):** one model for all lengths from 50 to 10000.
            - **Temporal order (§3 of the arXiv paper, §2.4 of the workshop paper):** pooling
              over time discards order, so XY and YX cannot be told apart.

            Command line: `python -m thesis_repro.ffattention grid --preset cpu`, then
            `python -m thesis_repro.ffattention report`. This notebook holds no model code: it
            reads the JSON records and renders them with the module's functions.
            """
        ),
        parameters(),
        setup("ffattention"),
        *presets("ffattention"),
        md(
            """
            ## Committed results

            The records under `results/ffattention/`, one JSON file per run. Each cell of
            Table 1: ours (best learning rate) / the paper's; runs still training are marked
            `running`. The figure shows test accuracy after each epoch for the best learning
            rate of each cell; dotted lines mark the paper's epochs to 100%.
            """
        ),
        code(
            """
            records = load_records(RESULTS / "ffattention")
            finished = sum(bool(r.get("finished")) for r in records)
            print(f"{len(records)} records ({finished} finished) in results/ffattention")
            display(Markdown(ffattention.render_table(records)))
            """
        ),
        code(
            """
            # One figure per table (preset, dtype policy and padding): a `cpu` run and a `paper`
            # run of a cell are never mixed. Then the variable-length runs of the table, every
            # learning rate (where it has any).
            for key, group in ffattention.tables_of(records).items():
                show(ffattention.render_figure(group, SCRATCH / f"ffattention_accuracy_{key}.png"))
                variable = SCRATCH / f"ffattention_variable_{key}.png"
                if ffattention.render_variable_figure(group, variable):  # None: no such runs
                    show(variable)
            """
        ),
        md(
            """
            ### One record

            What a run stores: its config, one entry per epoch (training loss, test accuracy
            and loss), and a summary once it has finished.
            """
        ),
        code(
            """
            if records:
                record = records[0]
                print(Path(record["path"]).name)
                print("config:", record["config"])
                print("last epoch:", record["epochs"][-1] if record["epochs"] else None)
                print("summary:", record["summary"])
            """
        ),
        SMOKE_INTRO,
        code(
            """
            from thesis_repro.runner import run_grid

            if RUN_SMOKE:
                run_grid(ffattention.EXPERIMENT, ffattention.runs("smoke"), SMOKE, verbose=0)
                smoke = load_records(SMOKE / "ffattention")
                display(Markdown(ffattention.render_table(smoke)))
                show(ffattention.render_figure(smoke, SCRATCH / "ffattention_smoke.png"))
            else:
                print("RUN_SMOKE is False: the smoke run is skipped")
            """
        ),
    ]


def addition_cells() -> list[nbformat.NotebookNode]:
    return [
        md(
            """
            # Malik (2016) §3.1: the addition problem, LSTM vs attention-gated LSTM

            S. Malik, *Application of artificial neural networks with attention mechanism for
            discovering distant dependencies in time series*, BSc thesis, University of Wrocław,
            2016. What is reproduced (module `thesis_repro.addition`):

            - **Task (§2.1):** pairs (value in [0, 1], marker) with two markers, one in each
              half; the target is the sum of the two marked values; lengths 500 to 550.
              Predicting the mean gives MSE 1/6, the baseline of every figure.
            - **Models:** a 64-unit LSTM with `y = LReLU(W_out h_T + b_out)` (§2.1.1), and the
              same LSTM whose input gate receives the energies `e_t` of a Raffel attention
              network (§2.1.2); gates use the scaled sigmoid `1.2 σ(x) − 0.1` (chapter 3). The
              thesis says only that the attention network "was trained": `gated-pretrained`
              trains it on the task first and freezes it, `gated-joint` trains it end to end.
            - **Training pace (§3.1.1, Figs 3.1 and 3.2):** learning starts at about step 2000
              with attention and at about step 8000 without.
            - **Generalisation (§3.1.2, Fig 3.3):** MSE on sequences up to 6000 steps long.
            - **What the input gates do:** the mean input gate at the marked steps and elsewhere.

            Command line: `python -m thesis_repro.addition grid --preset cpu`, then
            `python -m thesis_repro.addition report`. This notebook holds no model code.
            """
        ),
        parameters(),
        setup("addition"),
        *presets("addition"),
        md(
            """
            ## Committed results

            The records under `results/addition/`: when learning starts, beside the thesis;
            generalisation MSE by length; the input-gate statistics. Then every run's training
            curve (Figs 3.1, 3.2) and the generalisation error by length (Fig 3.3). The runs
            with the forget-gate bias at 1 (preset `cpu-forget-bias`, beyond the thesis) come
            after the thesis's, apart from them, as in `python -m thesis_repro.addition report`.
            """
        ),
        code(
            """
            records = load_records(RESULTS / "addition")
            print(f"{len(records)} records in results/addition")
            if not records:
                print("none yet: python -m thesis_repro.addition grid --preset cpu")
            for suffix, table, plotted in addition.report_parts(records) if records else []:
                display(Markdown(table))
                show(addition.render_training_figure(plotted, SCRATCH / f"training{suffix}.png"))
                show(addition.render_generalisation_figure(plotted, SCRATCH / f"gen{suffix}.png"))
            """
        ),
        SMOKE_INTRO,
        code(
            """
            from thesis_repro.runner import run_grid

            if RUN_SMOKE:
                run_grid(addition.EXPERIMENT, addition.runs("smoke"), SMOKE, verbose=0)
                smoke = load_records(SMOKE / "addition")
                display(Markdown(addition.render_table(smoke)))
                show(addition.render_training_figure(smoke, SCRATCH / "smoke_training.png"))
                show(addition.render_generalisation_figure(smoke, SCRATCH / "smoke_general.png"))
            else:
                print("RUN_SMOKE is False: the smoke run is skipped")
            """
        ),
    ]


def language_model_cells() -> list[nbformat.NotebookNode]:
    return [
        md(
            """
            # Malik (2016) §3.2: feed-forward language models with an attention-compressed prefix

            What is reproduced (package `thesis_repro.lm`, models in
            `thesis_repro.lm.model`):

            - **Models:** the feed-forward n-gram language model of Bengio et al. (§2.2.1:
              embeddings S = 100, hidden layer H = 200 with ReLU, softmax over the vocabulary),
              and its extension (§2.2.2) in which the words before the n-gram window are
              compressed by feed-forward attention into one vector `c`, placed in front of the
              window's embeddings.
            - **Corpus (§3.2.1):** the thesis used 7 M words of Polish Wikipedia; ELTeC-pol stands
              in for it here, and PTB is an extra comparison. Corpora are read from
              `$THESIS_REPRO_DATA/<name>` or `--corpus PATH` (`python -m thesis_repro reproduce
              --preset cpu --data DIR`), never copied into the repository.
            - **Training (§3.2.2):** SGD on minibatches of 1000, weight decay 1e-5, learning rate
              `ε0 / (1 + d·i)`; Table 3.1 without momentum, Table 3.2 with momentum 0.85.
            - **Results (§3.2.3):** test perplexity of the 5-gram, 10-gram, 5-gram + 2 and
              5-gram + 5 (Tables 3.1, 3.2) and validation perplexity per epoch (Figs 3.4, 3.5).
              What carries over to another corpus is the ordering and the gaps, not the
              absolute numbers.

            Command line: `python -m thesis_repro.lm grid --table 3.1 --preset cpu` (also
            `--table 3.2`, `--table ptb`, the thesis 4.2 tables `future-prefix`,
            `future-position`, `future-prefix-ptb`, `future-position-ptb`, and `gap`, the study
            of why the thesis's gaps are larger), then `python -m thesis_repro.lm report`.
            This notebook holds no model code.
            """
        ),
        parameters(),
        setup("lm"),
        code(
            """
            from thesis_repro.lm import gap, kneser_ney
            from thesis_repro.lm.config import GAP_TABLE


            def render_lm(results):
                \"\"\"Every table under results/lm/<corpus>/<table>/, and a figure per preset.\"\"\"
                folders = sorted(p for p in (results / "lm").glob("*/*") if p.is_dir())
                if not folders:
                    print(f"no records in {results / 'lm'}")
                for folder in folders:
                    records = load_records(folder)
                    corpus, table = folder.parent.name, folder.name
                    if table in lm.FUTURE_TABLES:  # thesis 4.2: uses the corpus's other tables
                        future = lm.report.render_future_table(table, load_records(folder.parent))
                        display(Markdown(future))
                        continue
                    if table == GAP_TABLE:  # draws on Tables 3.1 and 3.2 too
                        everything = load_records(folder.parent)
                        display(Markdown(gap.render_gap_table(everything)))
                        for preset in sorted({r["config"]["preset"] for r in records}):
                            path = SCRATCH / f"lm_gap_{corpus}_{preset}.png"
                            show(gap.render_gap_figure(everything, preset, path))
                        continue
                    baselines = kneser_ney.load_baselines(results, corpus)
                    display(Markdown(lm.report.render_table(records, baselines)))
                    for preset in sorted({r["config"]["preset"] for r in records}):
                        group = [r for r in records if r["config"]["preset"] == preset]
                        path = SCRATCH / f"lm_{corpus}_{table}_{preset}.png"
                        show(lm.report.render_figure(group, path, f"{corpus}, {table}, {preset}"))
            """
        ),
        md(
            """
            ## Tables and presets

            The thesis's numbers are data in `lm.TABLES`; the scale of a grid (corpus size,
            vocabulary, epochs, instances) is data in `lm.PRESETS`.
            """
        ),
        code(
            """
            for key, table in lm.TABLES.items():
                print(f"{key}: {table.title}; thesis: {table.paper or '-'}")
            print()
            for name, preset in lm.PRESETS.items():
                print(f"{name}: {preset.description}\\n")
            """
        ),
        md(
            """
            ## Committed results

            Every table under `results/lm/<corpus>/<table>/`: test perplexity (mean ± std over
            instances) beside the thesis's and the Kneser-Ney baselines, then validation
            perplexity after each epoch; the thesis 4.2 tables (perplexity by evaluation
            prefix, no per-epoch figure here: `python -m thesis_repro.lm report` draws theirs)
            and the gap study with its figure.
            """
        ),
        code("render_lm(RESULTS)"),
        md(
            """
            ## The synthetic corpus of the `smoke` preset

            Without a real corpus the experiment trains on `corpus.synthetic_corpus`, built so
            that a word 6 to 9 positions back decides a later noun: beyond a 5-gram's window,
            within reach of the 10-gram and of the 5-gram + 5.
            """
        ),
        code(
            """
            from thesis_repro.corpus import synthetic_corpus

            corpus = synthetic_corpus(2_000)
            print(f"V = {corpus.vocab_size}")
            print(" ".join(corpus.vocab[i] for i in corpus.train[:60]))
            """
        ),
        SMOKE_INTRO,
        code(
            """
            if RUN_SMOKE:
                synthetic = lm.resolve_corpus(None, None, None)  # no path, no data folder
                for table in ("3.1", "3.2", "ptb"):
                    lm.run_grid(table, synthetic, "smoke", SMOKE, verbose=0)
                render_lm(SMOKE)
            else:
                print("RUN_SMOKE is False: the smoke run is skipped")
            """
        ),
    ]


def attention_examples_cells() -> list[nbformat.NotebookNode]:
    return [
        md(
            """
            # Malik (2016) §3.2.4: examples of the weights assigned by attention

            For a few Wall Street Journal sentences the thesis shows every 5-word window of the
            attention language model's prefix, each word drawn with opacity proportional to its
            attention weight (from a model trained on 40 M words of WSJ text).

            Here: the thesis's three WSJ sentences, written as the PTB preprocessing writes
            them, for the 5-gram + 5 model trained on PTB; three Polish sentences from the
            eltec-pol test part (the first ones without unknown words, a fixed rule) for the
            Table 3.1 5-gram + 5 model; and one of them with and without position-aware
            attention (thesis 4.2). Each line is one window: the prefix words with opacity
            ∝ attention weight, a bar, the window words, the predicted word in grey.

            Command line: `python -m thesis_repro.lm examples --preset cpu` computes the
            examples from finished runs into `results/lm/attention_examples/*.json`;
            `python -m thesis_repro report` redraws `figures/attention_*.pdf` from them. This
            notebook holds no model code.
            """
        ),
        parameters(),
        setup("lm", "load_record"),
        code(
            """
            def render_examples(results):
                \"\"\"Draw every example record under results/lm/attention_examples/.\"\"\"
                paths = sorted((results / lm.examples.EXAMPLES_FOLDER).glob("*.json"))
                if not paths:
                    print(f"no example records in {results / lm.examples.EXAMPLES_FOLDER}")
                for path in paths:
                    record = load_record(path)
                    header = f"### Attention example `{path.stem}` ({record.get('note', '')})"
                    display(Markdown(header + "\\n\\n" + " ".join(record["words"])))
                    show(lm.examples.draw_example(record, SCRATCH / f"{path.stem}.png"))
            """
        ),
        md(
            """
            ## The examples

            Which runs and sentences (`lm.examples.EXAMPLES`); an example without
            sentences takes the first `count` sentences (3; 1 for `eltec_position`) of the
            corpus's test part that `pick_sentences` accepts (12-25 tokens, no unknown word).
            """
        ),
        code(
            """
            for example in lm.examples.EXAMPLES:
                panels = ", ".join(f"{p.table}/{p.model} ({p.variant})" for p in example.panels)
                print(f"{example.name} on {example.corpus}: {panels}")
                for sentence in example.sentences:
                    print("   ", sentence)
            """
        ),
        md("## Committed examples"),
        code("render_examples(RESULTS)"),
        SMOKE_INTRO,
        code(
            """
            if RUN_SMOKE:
                synthetic = lm.resolve_corpus(None, None, None)  # no path, no data folder
                for table in ("3.1", "ptb", "future-position"):
                    lm.run_grid(table, synthetic, "smoke", SMOKE, verbose=0)
                lm.examples.make_examples(SMOKE, SCRATCH, "smoke")
                render_examples(SMOKE)
            else:
                print("RUN_SMOKE is False: the smoke run is skipped")
            """
        ),
    ]


NOTEBOOKS = {
    "ffattention": ffattention_cells,
    "addition": addition_cells,
    "language_model": language_model_cells,
    "attention_examples": attention_examples_cells,
}


def build(name: str) -> nbformat.NotebookNode:
    """The notebook ``name``, with deterministic cell ids and no outputs."""
    cells = NOTEBOOKS[name]()
    for index, cell in enumerate(cells):
        cell["id"] = f"{name.replace('_', '-')}-{index:02d}"
    notebook = new_notebook(
        cells=cells, metadata={"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    )
    nbformat.validate(notebook)
    return notebook


def render(name: str) -> str:
    """The ``.ipynb`` text of notebook ``name``."""
    return nbformat.writes(build(name)) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (%(default)s)")
    parser.add_argument(
        "--check", action="store_true", help="compare instead of writing; exit 1 on a difference"
    )
    args = parser.parse_args(argv)
    stale = []
    for name in NOTEBOOKS:
        path = args.out / f"{name}.ipynb"
        if args.check:
            if not path.exists() or path.read_text() != render(name):
                stale.append(path.name)
        else:
            path.write_text(render(name))
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run python notebooks/build_notebooks.py): {', '.join(stale)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
