"""The trimmed trafilatura body paths (`body.trafilatura_steps`, body modes lean / cascade)."""

from __future__ import annotations

import pytest

from forecast_env.corpus_build import body
from forecast_env.corpus_build.extract import _parse, extract_page

PARA = ("The council voted on Tuesday to approve the new budget for the harbour district, which "
        "includes money for flood defences and a ferry terminal. ")


def _page(paras: int, nav: int = 0, sidebar: str = "") -> str:
    links = "".join(f'<li><a href="/s{i}">Section number {i} of the site</a></li>' for i in range(nav))
    text = "".join(f"<p>{PARA}Paragraph {i} adds detail on the plan and its cost.</p>" for i in range(paras))
    return (f"<html><head><title>Budget approved</title></head><body><nav><ul>{links}</ul></nav>"
            f"<article><h1>Budget approved</h1>{text}</article>{sidebar}<footer>(c) Gazette</footer></body></html>")


PAGES = {
    "article": _page(8, nav=20),
    "short": _page(1, nav=40),
    "sidebar": _page(5, sidebar="<aside><p>" + "Read our newsletter every morning for more. " * 5 + "</p></aside>"),
    "listing": "<html><body>" + "".join(f'<div><a href="/a{i}">Headline {i} about a story</a></div>'
                                        for i in range(30)) + "</body></html>",
    "empty": "<html><body></body></html>",
}


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_step_on_equals_trafilatura(name: str) -> None:
    """All steps on, the step-by-step cascade is trafilatura's own bare_extraction text."""
    html = PAGES[name]
    assert body.trafilatura_steps(html, "https://gazette.example/2025/04/01/budget") == \
        body.trafilatura_body(html, "https://gazette.example/2025/04/01/budget")


def test_lean_reads_the_article_and_leaves_out_chrome() -> None:
    """Without the readability comparison the body is still the article's paragraphs, no menu or footer."""
    text = body.trafilatura_steps(PAGES["article"], "https://gazette.example/a", readability=False)
    assert text.count("The council voted") == 8
    assert "Section number" not in text and "Gazette" not in text
    # with one fallback off the output is exactly the full cascade's where readability was not chosen
    assert text == body.trafilatura_body(PAGES["article"], "https://gazette.example/a")


def test_no_fallbacks_gives_nothing_on_an_empty_page() -> None:
    assert body.trafilatura_steps(PAGES["empty"], "", readability=False, justext=False, escalation=False) == ""


def test_cascade_keeps_a_trusted_body_and_hands_off_a_short_one(monkeypatch) -> None:
    """cascade: ours where it is long enough and left little prose out; trafilatura's lean path otherwise."""
    calls: list[str] = []
    real = body.trafilatura_steps

    def spy(html, url, **steps):
        calls.append(url)
        return real(html, url, **steps)

    monkeypatch.setattr(body, "trafilatura_steps", spy)
    long_text = extract_page(PAGES["article"], "https://gazette.example/long", body_mode="cascade").body
    assert calls == [] and long_text.count("The council voted") == 8
    assert long_text == body.own_body(_parse(PAGES["article"]))[0]
    extract_page(PAGES["short"], "https://gazette.example/short", body_mode="cascade")
    assert calls == ["https://gazette.example/short"]


def test_left_out_prose_is_measured() -> None:
    """The cascade's signal: prose blocks outside the chosen body count as left out."""
    tree = _parse(PAGES["sidebar"])
    text, n, missed = body.measure_body(tree, left_out=True)
    assert text.count("The council voted") == 5 and n == len(text.replace("\n\n", ""))
    assert missed == 0  # the aside is boilerplate by tag: never a candidate
    html = PAGES["article"].replace("</article>", "</article><div class='more'><p>" + PARA * 3 + "</p></div>")
    assert body.measure_body(_parse(html), left_out=True)[2] >= len(PARA * 3) - 1
