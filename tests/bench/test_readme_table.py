"""The README's performance table names the newest side-by-side results file (regenerate it with
``python -m bench.readme_table`` after a run), and is what that file says."""

import json

from bench.readme_table import BEGIN, END, README, newest_results, table
from bench.side_by_side import ROOT


def test_the_readme_table_is_the_newest_results_file():
    newest = newest_results()
    section = README.read_text().split(BEGIN, 1)[1].split(END, 1)[0]
    assert f"`{newest.relative_to(ROOT)}`" in section, (
        f"README.md's performance table is not from {newest.name}: run `python -m bench.readme_table`")
    assert section.strip() == table(json.loads(newest.read_text()), newest).strip()


def test_the_newest_file_is_chosen_by_its_date_not_its_name(tmp_path):
    for name, date in (("side-by-side-2026-11-29-after.json", "2026-11-29T04:10:00"),
                       ("side-by-side-2026-11-29-before.json", "2026-11-29T03:30:00")):
        (tmp_path / name).write_text(json.dumps({"date": date}))
    assert newest_results(tmp_path).name == "side-by-side-2026-11-29-after.json"
