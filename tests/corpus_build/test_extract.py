"""Stage 2-3: extraction from hostile HTML, metadata candidates, normalization."""

from __future__ import annotations

from datetime import UTC

import pytest

from forecast_env.corpus_build.extract import extract_page, normalize_text, url_date

PARA = (
    "The city council met on Tuesday to discuss the new budget, and members said that the plan "
    "would have to be approved with broad support from residents of the district."
)


def _article(n: int = 6) -> str:
    return "".join(f"<p>{PARA} Paragraph {i}.</p>" for i in range(n))


CHROME = (
    "<header><nav><ul><li><a href='/'>Home</a></li><li><a href='/world'>World news and more</a></li></ul></nav></header>"
    "<div class='cookie-banner'><p>We use cookies to improve your experience on our website, see the policy.</p></div>"
    "<aside class='related'><p>Related: another story about something else entirely happening today.</p></aside>"
    "<footer><p>Copyright 2026 Example News. All rights reserved. Terms of use and privacy policy.</p></footer>"
)


def test_full_page_fields() -> None:
    html = (
        "<!DOCTYPE html><html><head><title>Page title | Site</title>"
        "<meta property='og:title' content='  Council   approves budget '>"
        "<meta name='description' content='The council met.'>"
        "<link rel='canonical' href='/news/2026/03/14/council'>"
        "</head><body>"
        + CHROME
        + "<article><h1>Council approves budget</h1>"
        + _article()
        + "</article></body></html>"
    )
    default = extract_page(html, "https://example.com/x?utm_source=a").body
    assert all(f"Paragraph {i}." in default for i in range(6)) and "cookies" not in default
    ext = extract_page(html, "https://example.com/x?utm_source=a", body_mode="own")  # our paragraph layout
    assert ext.title == "Council approves budget"
    assert ext.summary == "The council met."
    assert ext.canonical_url == "https://example.com/news/2026/03/14/council"
    assert ("url_date", "2026-03-14") in ext.pub_candidates
    paras = ext.body.split("\n\n")
    assert len(paras) == 6 and paras[0].startswith("The city council") and paras[5].endswith("Paragraph 5.")
    assert "cookies" not in ext.body and "Copyright" not in ext.body and "Related" not in ext.body


def test_title_fallbacks_and_summary_fallbacks() -> None:
    ext = extract_page(
        "<html><head><title>T1</title><meta property='og:description' content='D2'></head>"
        "<body>" + _article() + "</body></html>",
        "u",
    )
    assert (ext.title, ext.summary) == ("T1", "D2")
    ext = extract_page(
        "<html><body><h1>Heading</h1><meta name='twitter:description' content='D3'>"
        + _article()
        + "</body></html>",
        "u",
    )
    assert (ext.title, ext.summary) == ("Heading", "D3")


def test_no_body_tag_and_broken_markup() -> None:
    ext = extract_page("<title>x</title><div><p>" + PARA + "<p>" + PARA + "<div><b>unclosed " + PARA, "u")
    assert ext.title == "x" and ext.body and ext.body.count("The city council") >= 2
    for bad in (
        "",
        "   ",
        "<",
        "<html></html>",
        "\x00\x01",
        "<?xml version='1.0' encoding='latin-1'?><html>",
    ):
        ext = extract_page(bad, "https://x.com/a")
        assert not ext.body


def test_encoding_declaration_and_unicode() -> None:
    html = (
        "<?xml version='1.0' encoding='iso-8859-1'?><html><head><meta charset='iso-8859-1'>"
        "<title>Caf\u0065\u0301 d\u00e9j\u00e0</title></head><body><article>"
        + _article(3)
        + "</article></body></html>"
    )
    ext = extract_page(html, "u")
    assert ext.title == "Caf\u00e9 d\u00e9j\u00e0"  # NFC
    assert ext.body.count("city council") == 3


def test_article_body_itemprop_preferred() -> None:
    html = (
        "<html><body><div class='sidebar'>" + _article(8) + "</div>"
        "<div itemprop='articleBody'><p>Only this text. " + PARA + "</p>"
        + "<p>The mayor said the vote would be held next month after a final public hearing.</p>" * 3
        + "</div></body></html>"
    )
    ext = extract_page(html, "u")
    assert ext.body.startswith("Only this text.") and ext.body.count("city council") == 1


def test_densest_paragraph_cluster_without_article_tag() -> None:
    html = (
        "<html><body><div id='top'><p>Short teaser one here.</p></div><div class='story'>"
        + _article(5)
        + "</div><div><p>Another teaser.</p></div></body></html>"
    )
    ext = extract_page(html, "u")
    assert ext.body.count("city council") == 5 and "teaser" not in ext.body


def test_trafilatura_fallback_for_br_separated_text() -> None:
    text = "<br><br>".join(PARA + f" Line {i}." for i in range(6))
    ext = extract_page("<html><body><div class='content'>" + text + "</div></body></html>", "u")
    assert ext.body and ext.body.count("city council") >= 5


def test_jsonld_nested_graph_list_types_and_invalid() -> None:
    nested = (
        '<script type="application/ld+json"><!-- {"@context":"https://schema.org","@graph":['
        '{"@type":"WebSite","name":"x"},{"@type":"WebPage","mainEntity":{"@type":["Thing","NewsArticle"],'
        '"datePublished":"2026-03-01T00:00:00Z","dateModified":{"@value":"2026-03-02"},}},]} --></script>'
    )
    ext = extract_page("<html><head>" + nested + "</head><body>" + _article() + "</body></html>", "u")
    assert ext.pub_candidates[0] == ("jsonld_datePublished", "2026-03-01T00:00:00Z")
    assert ext.mod_candidates[0] == ("jsonld_dateModified", "2026-03-02")
    invalid = (
        '<script type="application/ld+json">{"@type": "NewsArticle", "headline": "a "quoted" b",'
        ' "datePublished": "2026-03-03T01:00:00Z"</script>'
        '<script type="application/ld+json"><![CDATA[[{"@type":"http://schema.org/BlogPosting",'
        '"dateCreated":"2026-03-04"}]]]></script>'
    )
    ext = extract_page("<html><head>" + invalid + "</head><body>" + _article() + "</body></html>", "u")
    rules = dict(ext.pub_candidates)
    assert rules["jsonld_datePublished"] == "2026-03-03T01:00:00Z"
    assert rules["jsonld_dateCreated"] == "2026-03-04"


def test_huge_page() -> None:
    chrome = "<div class='menu'>" + "<a href='/x'>link text</a>" * 20000 + "</div>"
    html = (
        "<html><head><title>Big</title></head><body>"
        + chrome
        + "<article>"
        + _article(40)
        + "</article>"
        + chrome
        + "</body></html>"
    )
    assert len(html) > 500_000
    ext = extract_page(html, "u")
    assert ext.title == "Big" and ext.body.count("city council") == 40


def test_url_date_forms() -> None:
    assert url_date("https://x.com/2026/03/14/story") == "2026-03-14"
    assert url_date("https://x.com/news/2026-03-14/story") == "2026-03-14"
    assert url_date("https://x.com/2026/3/4/story") == "2026-03-04"
    assert url_date("https://x.com/2026/03/story") is None
    assert url_date("https://x.com/2026/13/40/story") is None
    assert url_date("https://x.com/id/120260314999") is None


def test_normalize_text() -> None:
    raw = "  A\u0301  b\t\tc \r\n\r\n\r\n\r\nd\x00e\x07 \u00a0 f\n\n\n"
    assert normalize_text(raw) == "\u00c1 b c\n\nde f"
    assert normalize_text("") == ""


def test_against_sample_world_truth(request) -> None:
    """Run stages 2-7 over the micro world's WARC pages; compare with truth.json."""
    from datetime import datetime

    from warcio.archiveiterator import ArchiveIterator

    from forecast_env.config import load_config
    from forecast_env.corpus_build.langid import LanguageGate, LanguageIdentifier
    from forecast_env.corpus_build.leakage import screen_leakage
    from forecast_env.corpus_build.quality import active_profile, apply_filters, build_filters
    from forecast_env.corpus_build.timestamps import assign_timestamps
    from forecast_env.corpus_build.warc import decode_payload

    world = request.getfixturevalue("micro_world")
    truth = request.getfixturevalue("micro_truth")["articles"]
    cfg = load_config("corpus")
    lid = LanguageIdentifier()
    gate = LanguageGate(lid, cfg["language"]["gate_max_score"])
    filters = build_filters(cfg["quality"])
    profile = active_profile(cfg["quality"])
    mismatches: list[str] = []
    layouts: dict[str, int] = {}
    checked = 0
    for path in sorted((world / "news").glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type != "response":
                    continue
                url = rec.rec_headers.get_header("WARC-Target-URI")
                exp = truth.get(url)
                if exp is None or exp.get("stage") == "read":
                    continue
                payload = rec.content_stream().read()
                ctype = rec.http_headers.get_header("Content-Type") if rec.http_headers else None
                decoded = decode_payload(payload, ctype)  # the pipeline's charset handling
                html = decoded[0] if decoded else payload.decode("utf-8", "replace")
                crawl = datetime.fromisoformat(rec.rec_headers.get_header("WARC-Date"))
                lm = rec.http_headers.get_header("Last-Modified") if rec.http_headers else None
                gated = extract_page(html, url, gate=gate)  # the build's call: the gate before the body
                ext = extract_page(html, url) if gated.gate_score is not None else gated  # every body is checked
                ts = assign_timestamps(ext, url, lm, crawl.astimezone(UTC))
                got: dict = {"t_rule": ts.t_rule, "t_source": ts.t_source, "day": ts.day.isoformat()}
                stage = reason = None
                leak = False
                if gated.gate_score is not None:
                    stage, reason = "lang", "not_english_page"
                elif not ext.body:
                    stage, reason = "extract", "no_body"
                elif lid.english_score(ext.body) < cfg["language"]["min_english_score"]:
                    stage, reason = "lang", "not_english"
                else:
                    res = apply_filters(ext.body, filters)
                    if not res.keep:
                        stage, reason = "quality", res.reason
                    else:
                        leak = screen_leakage(res.text, ext.title, ts.visible_at)[0]
                if profile in exp.get("kept_by", []):  # a planted quality page the default profile keeps
                    exp = {k: v for k, v in exp.items() if k not in ("stage", "reason")}
                if exp.get("stage") in ("extract", "lang", "quality") or stage is not None:
                    got.update(stage=stage, reason=reason)
                elif exp.get("leak") is not None:
                    got["leak"] = leak
                checked += 1
                if exp.get("layout"):
                    layouts[exp["layout"]] = layouts.get(exp["layout"], 0) + 1
                # the default body is trafilatura's, which starts with the headline when the <h1> sits in
                # the story's container; both forms are exact
                forms = {normalize_text(exp["body"])} if "body" in exp else set()
                if "body" in exp and exp.get("title"):
                    forms.add(normalize_text(exp["title"] + "\n\n" + exp["body"]))
                if "body" in exp and ext.body not in forms:
                    mismatches.append(f"{url} body ({exp['layout']} layout): expected {exp['body'][:80]!r}..., "
                                      f"got {(ext.body or '')[:80]!r}...")
                for key, value in got.items():
                    if key == "reason" and value in (exp.get("reason_alt") or []):
                        continue
                    if (
                        key in exp
                        and exp[key] != value
                        and not (key in ("stage", "reason") and exp.get(key) in (None, "") and value is None)
                    ):
                        mismatches.append(f"{url} {key}: expected {exp[key]!r}, got {value!r}")
    assert checked > 0
    from forecast_env.synth.pages import LAYOUTS

    assert set(layouts) == set(LAYOUTS), layouts  # every real-world layout is exercised
    assert not mismatches, f"{len(mismatches)} mismatches of {checked} pages:\n" + "\n".join(mismatches[:20])


def test_script_nested_in_unclosed_paragraph_stays_out_of_body() -> None:
    # libxml2 does not close an open <p> at an HTML5 <section>: the ad slot's script ends up inside it.
    para = "Researchers found a flint tool covered with birch tar near the coast of the North Sea. "
    html = (
        "<html><body><article><p>" + para * 3
        + "<section class='banner'><script>googletag.cmd.push(function() { show('ad-2'); });</script>"
        + "<style>.x { color: red; }</style></section>"
        + "<p>" + para * 3 + "</p></article></body></html>"
    )
    ex = extract_page(html, "https://example.com/a")
    assert ex.body is not None and "Researchers found" in ex.body
    assert "googletag" not in ex.body and "{" not in ex.body and "color" not in ex.body


def test_heading_with_anchor_id_kept() -> None:
    # In-page anchor ids are slugged from the heading text; they must not read as boilerplate names.
    para = "The committee met on Tuesday to discuss the budget and the new proposals for the city. "
    html = (
        "<html><body><article><p>" + para * 3 + "</p>"
        "<h3 id='nav_share_prices_fall'>Share prices fall after the vote</h3>"
        "<p>" + para * 3 + "</p><div id='comments'><p>" + "Great article, thanks a lot. " * 5 + "</p></div>"
        "</article></body></html>"
    )
    ex = extract_page(html, "https://example.com/b")
    assert "Share prices fall after the vote" in ex.body
    assert "Great article" not in ex.body


@pytest.mark.parametrize(
    "title, names, expected",
    [
        ("Uncorking the wine trade | DW | 10.06.2013", ["DW.COM"], "Uncorking the wine trade"),
        ("Parasite wins best picture - Reuters", ["Reuters"], "Parasite wins best picture"),
        ("Apple unveils iOS 13 - The Verge", ["theverge"], "Apple unveils iOS 13"),
        ("Biden - Reuters poll shows lead", ["Reuters"], "Biden - Reuters poll shows lead"),
        ("Council votes on budget | City Hall", ["Herald"], "Council votes on budget | City Hall"),
        ("Reuters | Markets", ["Reuters"], "Reuters | Markets"),
    ],
)
def test_site_suffix_is_cut_only_when_it_names_the_site(title, names, expected):
    from forecast_env.corpus_build.extract import strip_site_suffix

    assert strip_site_suffix(title, names) == expected


def test_title_suffix_from_og_site_name_and_host():
    html = ('<html><head><meta property="og:site_name" content="Westmarch Herald">'
            '<title>Council approves the harbour budget | Westmarch Herald</title></head>'
            '<body><article><p>The council approved the budget on Tuesday after a long debate.</p></article></body></html>')
    assert extract_page(html, "https://example.org/a").title == "Council approves the harbour budget"
    html2 = html.replace('<meta property="og:site_name" content="Westmarch Herald">', "").replace(
        "Westmarch Herald</title>", "DW</title>")
    assert extract_page(html2, "https://www.dw.com/en/a").title == "Council approves the harbour budget"


# ------------------------------------------------------------------------------------------------
# The failure classes seen on real pages (issue 11), each on small self-written HTML: the hand-written
# extractor's behaviour (`body_mode="own"`; the default body path is trafilatura's, issue 25)
# ------------------------------------------------------------------------------------------------

STORY = [
    "The harbour authority approved the new ferry timetable on Monday after a three-hour meeting.",
    "Officials said the changes would add two early crossings on weekdays and one late service on Fridays.",
    "Residents of the island had asked for more frequent services for years, citing long waits in winter.",
    "The operator said it would hire six more crew members before the timetable starts in April.",
    "Critics argued that the fares, which rise by four percent, would hit commuters hardest this year.",
    "The authority will review the timetable again in the autumn, when passenger numbers are published.",
]


def _paragraphs_in(body: str | None) -> int:
    return sum(s in (body or "") for s in STORY)


@pytest.mark.parametrize("wrapper_class", [
    "l-sidebar-fixed l-segment l-article-body-segment",  # a layout *with* a sidebar, not the sidebar
    "article-body has-paywall",
    "paywall-content story__body",
    "main-col with-sidebar",
])
def test_layout_class_with_boilerplate_word_keeps_the_body(wrapper_class: str) -> None:
    html = (
        "<html><body><header><nav><a href='/'>Home</a></nav></header><article class='l-main'>"
        "<p class='c-standfirst'>A longer timetable for the island ferry, and higher fares.</p>"
        f"<div class='{wrapper_class}'><div class='c-entry-content'>"
        + "".join(f"<p>{s}</p>" for s in STORY)
        + "</div><aside class='c-related'><p>Read next: the best beaches of the coast this summer.</p></aside>"
        "</div></article><div class='sidebar'><p>Most read: ten things you missed this week in town.</p></div>"
        "</body></html>"
    )
    body = extract_page(html, "https://example.com/a", body_mode="own").body
    assert _paragraphs_in(body) == len(STORY), body
    assert "Read next" not in body and "Most read" not in body


@pytest.mark.parametrize("para", [
    "<div class='zn-body__paragraph'>{}</div>",
    "<div data-component='text-block' data-index='1'><span>{}</span></div>",
    "<div class='article__text-block article__text-block--lead'>{}</div>",
    "<section class='paragraph'>{} <a href='/x'>link</a></section>",
])
def test_div_paragraphs_are_all_read(para: str) -> None:
    html = (
        "<html><body><div class='site-nav'><a href='/'>Home</a> <a href='/w'>World</a></div>"
        "<div itemprop='articleBody'><div class='media'><img src='a.jpg'></div>"
        "<p class='editor-note'>Editor's note: this story was updated with the operator's response.</p>"
        + "".join(para.format(s) for s in STORY)
        + "</div><div class='newsletter-signup'>Sign up for our daily newsletter and never miss a story again today.</div>"
        "</body></html>"
    )
    body = extract_page(html, "https://example.com/b", body_mode="own").body
    assert _paragraphs_in(body) == len(STORY), body
    assert "newsletter" not in body


def test_old_table_layout_gives_the_article_not_the_navigation() -> None:
    nav = "<br>".join(f"<a href='/s{i}'>Section number {i} of the site</a>" for i in range(40))
    html = (
        "<html><body bgcolor='#ffffff'><table width='100%'><tr>"
        f"<td width='180' valign='top'><font size='-1'>{nav}</font></td>"
        "<td valign='top'><font face='Arial'><b>Ferry timetable approved</b><br><br>"
        + "<br><br>".join(STORY)
        + "</font></td></tr></table>"
        "<center><font size='-2'>Copyright 2004 Island Weekly. All rights reserved.</font></center></body></html>"
    )
    body = extract_page(html, "https://example.com/c", body_mode="own").body
    assert _paragraphs_in(body) == len(STORY), body
    assert "Section number" not in body


@pytest.mark.parametrize("comments", [
    "<div id='comments' class='comments-area'><ol class='commentlist'>{}</ol></div>",
    "<section class='js-discussion'><div id='disqus_thread'>{}</div></section>",
    "<div class='reader-responses'><ul class='commentlist'>{}</ul></div>",
])
def test_comment_section_is_not_the_body(comments: str) -> None:
    # No article markup, and one long reader comment has more paragraph text than the story.
    long_reply = "".join(
        f"<p>I have taken this ferry for twenty years and the service has never been this bad, frankly. "
        f"Reply number {i} of mine agrees with everything said above and adds a little more.</p>"
        for i in range(10)
    )
    replies = "".join(
        f"<li class='comment'><div class='comment-author'>reader{i}</div><div class='comment-body'>"
        + (long_reply if i == 1 else "<p>Reply number 0 says the old timetable was better for everyone.</p>")
        + "</div></li>"
        for i in range(3)
    )
    html = (
        "<html><body><div class='wrap'><div class='post'><h1>Ferry timetable approved</h1>"
        + "".join(f"<p>{s}</p>" for s in STORY)
        + "</div>" + comments.format(replies) + "</div></body></html>"
    )
    body = extract_page(html, "https://example.com/d", body_mode="own").body
    assert _paragraphs_in(body) == len(STORY), body
    assert "Reply number" not in body


def test_gallery_inside_the_article_is_not_the_body() -> None:
    # A 30-slide gallery embedded in the story holds more text than the story: still not body.
    slides = "".join(
        f"<li><h2>{i}/30 Another headline</h2><p>Slide caption number {i} describes a photograph "
        "of something that happened somewhere else entirely, months ago.</p><p class='credits'>Getty</p></li>"
        for i in range(30)
    )
    html = (  # paragraphs of two sentences: a body long enough to be trusted without a second opinion
        "<html><body><article><div class='text-wrapper'>"
        + "".join(f"<p>{s} {s}</p>" for s in STORY[:3])
        + f"<div class='widget-wrapper type-gallery'><div class='full-gallery'><ul class='legends'>{slides}</ul></div></div>"
        + "".join(f"<p>{s} {s}</p>" for s in STORY[3:])
        + "</div></article></body></html>"
    )
    body = extract_page(html, "https://example.com/e", body_mode="own").body
    assert _paragraphs_in(body) == len(STORY), body
    assert "Slide caption" not in body
