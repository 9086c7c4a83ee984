import pytest

from fedbandit.book.scale import by_scale, get_scale


@pytest.mark.parametrize("raw, expected", [("quick", "quick"), ("paper", "paper"), (" Quick ", "quick"), ("", "paper")])
def test_scale_values(monkeypatch, raw, expected):
    monkeypatch.setenv("FEDBANDIT_SCALE", raw)
    assert get_scale() == expected


def test_unset_scale_is_paper(monkeypatch):
    monkeypatch.delenv("FEDBANDIT_SCALE", raising=False)
    assert get_scale() == "paper"
    assert by_scale(quick=1, paper=2) == 2


def test_unknown_scale_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("FEDBANDIT_SCALE", "huge")
    with pytest.raises(ValueError, match="FEDBANDIT_SCALE.*'huge'"):
        get_scale()


def test_scale_log(monkeypatch, tmp_path):
    log = tmp_path / "scale.log"
    monkeypatch.setenv("FEDBANDIT_SCALE", "quick")
    monkeypatch.setenv("FEDBANDIT_SCALE_LOG", str(log))
    assert by_scale(quick="q", paper="p") == "q"
    assert log.read_text().split()[1] == "quick"
