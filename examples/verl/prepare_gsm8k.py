"""GSM8K in verl's parquet format, the data examples/verl/run_grpo.sh trains on.

    python examples/verl/prepare_gsm8k.py --out ~/data/gsm8k   # writes train.parquet, test.parquet

verl's package on the index does not ship its data-preparation scripts (they
live in verl's repository, under examples/data_preprocess/). This script writes
the rows verl's trainer reads: the question as a chat message under ``prompt``
(verl's ``data.prompt_key``), ``data_source = "openai/gsm8k"``, on which verl's
default reward (``verl.utils.reward_score.default_compute_score``) dispatches to
its GSM8K scorer, and the reference answer (the number after ``####`` in the
dataset's solution) as ``reward_model.ground_truth``, the string that scorer
compares the model's ``#### <answer>`` with. Needs ``datasets`` (a verl
dependency) and the network, to fetch openai/gsm8k from the Hugging Face hub.
"""

from __future__ import annotations

import argparse
import os

DATA_SOURCE = "openai/gsm8k"
#: asks for the final line verl's strict GSM8K scorer reads: "#### <number>"
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'


def final_answer(solution: str) -> str:
    """The number after the last ``####`` of a GSM8K solution, without commas."""
    if "####" not in solution:
        raise ValueError(f"a GSM8K solution without '####': {solution[-80:]!r}")
    return solution.rsplit("####", 1)[1].strip().replace(",", "")


def to_verl_row(example: dict, index: int, split: str) -> dict:
    """One GSM8K example (``question``, ``answer``) as a row of verl's dataset."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": f"{example['question']} {INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": final_answer(example["answer"])},
        "extra_info": {"split": split, "index": index, "question": example["question"],
                       "answer": example["answer"]},
    }


def write(splits, out: str) -> list[str]:
    """Write each ``datasets.Dataset`` of ``splits`` (name -> dataset) to
    ``out/<name>.parquet`` in verl's format; returns the paths."""
    os.makedirs(out, exist_ok=True)
    paths = []
    for name, dataset in splits.items():
        rows = dataset.map(to_verl_row, with_indices=True, fn_kwargs={"split": name},
                           remove_columns=dataset.column_names)
        path = os.path.join(out, f"{name}.parquet")
        rows.to_parquet(path)
        paths.append(path)
    return paths


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.expanduser("~/data/gsm8k"),
                        help="folder for train.parquet and test.parquet (default ~/data/gsm8k, "
                             "where run_grpo.sh looks)")
    args = parser.parse_args(argv)
    import datasets

    splits = datasets.load_dataset(DATA_SOURCE, "main")
    for path in write({"train": splits["train"], "test": splits["test"]}, args.out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
