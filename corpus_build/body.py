"""The article body of a parsed page (stage 2; definitions in docs/design.md §2.extraction): a fast
extractor of our own that checks its own result and hands doubtful pages to trafilatura.

1. Blocks: ``<p>``, headings, ``<li>``, ``<blockquote>``, ``<pre>``; *text divs* (a ``<div>``,
   ``<section>`` or ``<td>`` with inline content only: many sites write paragraphs as
   ``<div class="...__paragraph">`` or ``<div data-component="text-block">``); *loose runs* (text
   written straight into a container between its blocks, as old table layouts do).
2. The root: ``itemprop=articleBody``, else the ``<article>`` with the most block text (unless the
   densest cluster holds more than twice as much), else the densest cluster of prose.
3. The root's blocks without boilerplate: tags (nav, aside, figure, ...) and class/id names read by
   their parts (``l-sidebar-fixed`` -> l, sidebar, fixed). A named element that holds most of the
   root's prose is a layout wrapper and stays; comment threads and photo galleries never do.

Self-check: a body under `MIN_TRUSTED_CHARS` is doubtful; trafilatura's default (full) extraction
then reads the raw page, and the longer text wins. Old table layouts must not need it: trafilatura
keeps their navigation cell in every mode (fast or full, with or without tables), while our blocks
leave out cells that are mostly link text.
"""

from __future__ import annotations

import re

import lxml.etree

__all__ = ["BODY_MODES", "DEFAULT_BODY_MODE", "article_body", "block_text", "own_body", "table_share", "text_of",
           "trafilatura_body"]

#: Subtrees that are never body text.
BOILER_TAGS = frozenset({
    "nav", "aside", "footer", "header", "form", "script", "style", "noscript", "iframe", "svg",
    "button", "select", "figure", "figcaption", "template", "menu", "textarea", "dialog",
})
#: Class/id parts naming side content (matched against the parts of a name split at space, - and _).
BOILER_WORDS = frozenset({
    "share", "sharing", "social", "comment", "comments", "related", "newsletter", "promo", "advert",
    "ad", "ads", "sponsor", "sponsored", "subscribe", "subscription", "signup", "sidebar", "menu",
    "breadcrumb", "breadcrumbs", "cookie", "consent", "footer", "header", "nav", "navigation",
    "recommend", "recommended", "trending", "popular", "outbrain", "taboola", "paywall", "byline",
    "caption", "tag", "tags", "disqus", "readmore", "newsletters", "banner", "modal", "popup",
})
#: Parts that mark reader comments: excluded even when they hold most of the text.
COMMENT_WORDS = frozenset({"comment", "comments", "disqus", "replies", "respond"})
#: Parts that mark photo galleries and slideshows (a caption per slide, unrelated to the story):
#: excluded even when they hold most of the text, like comment sections.
GALLERY_WORDS = frozenset({"gallery", "slideshow", "carousel", "slider", "slides"})
#: Two-part names that the part split would miss ("most-read", "read-next", "more-stories").
BOILER_PAIRS = (("most", "read"), ("read", "next"), ("more", "stories"), ("also", "like"))
_PARTS = re.compile(r"[\s_\-]+|(?<=[a-z])(?=[A-Z])")

_BLOCK_TAGS = frozenset({"p", "h2", "h3", "h4", "h5", "h6", "li", "blockquote", "pre"})
_TEXT_DIV_TAGS = frozenset({"div", "section", "td"})
#: Elements that make their parent a container rather than a text div.
_STRUCTURE = frozenset({
    "p", "div", "section", "article", "main", "ul", "ol", "li", "dl", "table", "tr", "td", "th",
    "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "header", "footer", "aside", "nav", "form",
    "figure", "iframe", "video", "audio", "canvas", "svg", "picture", "hr",
})
_CANDIDATE_TAGS = tuple(_BLOCK_TAGS | _TEXT_DIV_TAGS)
_PROSE_TAGS = frozenset({"p", "div", "section", "td", "blockquote", "pre"})
#: Blocks dropped when most of their text is link text (paragraphs keep their inline links).
_LINK_CHECKED = frozenset({"li", "div", "section", "td"})
#: Containers whose loose text (inline content between their blocks) is read as paragraphs.
_LOOSE_TAGS = ("div", "section", "td", "article", "main", "span", "font", "center", "body")
_MIN_TEXT_DIV_WORDS = 8
_MIN_DENSITY_CHARS = 25
#: A sibling of the densest element joins the body when it holds this share of that element's prose.
SIBLING_SHARE = 0.2
#: Bodies shorter than this (characters) are doubtful.
MIN_TRUSTED_CHARS = 600
#: trafilatura's text replaces a doubtful body of ours when it is this much longer: a short story
#: that both read the same way should not change for trafilatura's extra headline line.
HANDOFF_GAIN = 1.25


def _name_parts(el, own_block: bool) -> list[str]:
    attrs = el.get("class") or ""
    if not own_block:
        attrs += " " + (el.get("id") or "")
    if not attrs.strip():
        return []
    return [p.lower() for p in _PARTS.split(attrs) if p]


def boiler_kind(el, own_block: bool = False) -> str | None:
    """'tag', 'comment' or 'name' when el looks like boilerplate, else None.

    For a paragraph/heading block itself (own_block) the id is ignored: ids on blocks are in-page
    anchors slugged from the text ("share-prices-fall"), not page-template names."""
    tag = el.tag
    if tag in BOILER_TAGS:
        return "tag"
    parts = _name_parts(el, own_block)
    if not parts:
        return None
    words = set(parts)
    # "commentlist", "comments-area", "comment_body" (not "commentary": opinion columns)
    if words & COMMENT_WORDS or any(w.startswith("comment") and not w.startswith("commenta") for w in words):
        return "comment"
    if words & GALLERY_WORDS:
        return "gallery"
    if words & BOILER_WORDS:
        return "name"
    for a, b in BOILER_PAIRS:
        if a in words and b in words:
            return "name"
    return None


def text_of(el) -> str:
    """All text under el (scripts included), as lxml serializes it."""
    return lxml.etree.tostring(el, method="text", encoding=str, with_tail=False)


def _collect_text(el, parts: list[str]) -> None:
    if el.text:
        parts.append(el.text)
    for child in el:
        if isinstance(child.tag, str) and child.tag not in BOILER_TAGS:
            _collect_text(child, parts)
        if child.tail:
            parts.append(child.tail)


def block_text(el) -> str:
    """Whitespace-collapsed text of el without script/style/figure/aside/... subtrees inside it.

    Real pages nest such elements inside a block: an unclosed <p> swallows the following ad
    <section><script> (libxml2 does not close <p> at HTML5 tags), and that script text would
    otherwise reach the body (and trip the curly-bracket quality filter)."""
    try:
        if next(el.iterdescendants(*BOILER_TAGS), None) is None:
            return " ".join(text_of(el).split())
        parts: list[str] = []
        _collect_text(el, parts)
        return " ".join("".join(parts).split())
    except ValueError:
        return ""


def _link_chars(el) -> int:
    return sum(len(" ".join(text_of(a).split())) for a in el.iter("a"))


class _Block:
    __slots__ = ("_prose", "chain", "el", "links", "loose", "text")

    def __init__(self, el, text: str, chain: list, links: int = -1) -> None:
        self.el, self.text, self.chain = el, text, chain
        self.links = links
        self._prose = -1
        self.loose = links >= 0  # a run of inline content directly inside a container (el)

    def link_share(self) -> float:
        if self.links < 0:
            self.links = _link_chars(self.el)
        return self.links / max(len(self.text), 1)

    def prose(self) -> int:
        """Characters of running text: a paragraph (not a list item or heading: those are also what
        teaser lists are made of) of >= 25 characters that is not mostly link text; else 0."""
        if self._prose < 0:
            n = len(self.text)
            self._prose = n if ((self.loose or self.el.tag in _PROSE_TAGS) and n >= _MIN_DENSITY_CHARS
                                and self.link_share() <= 0.5) else 0
        return self._prose


def _chain(el, scope) -> list | None:
    """el's ancestors up to scope (inclusive); None when one of them is a boilerplate tag."""
    chain = []
    node = el.getparent()
    while node is not None and node is not scope:
        if node.tag in BOILER_TAGS:
            return None
        chain.append(node)
        node = node.getparent()
    chain.append(scope)
    return chain


def _loose_runs(el, scope, structural: set, out: list[_Block]) -> None:
    """Text written straight into a container between its blocks ("text<br>more text<div>..."):
    each run of inline content of >= _MIN_TEXT_DIV_WORDS words becomes a block."""
    if not (el.text and el.text.strip()) and not any(c.tail and c.tail.strip() for c in el):
        return
    chain = None
    parts: list[str] = [el.text or ""]
    links = 0

    def flush() -> None:
        nonlocal chain, parts, links
        text = " ".join("".join(parts).split())
        if text.count(" ") + 1 >= _MIN_TEXT_DIV_WORDS:
            if chain is None:
                up = [] if el is scope else _chain(el, scope)
                if up is None:
                    return
                chain = [el, *up]
            out.append(_Block(el, text, chain, links))
        parts, links = [], 0

    for child in el:
        tag = child.tag
        if isinstance(tag, str) and (tag in _STRUCTURE or tag in BOILER_TAGS or child in structural):
            flush()
        elif isinstance(tag, str) and tag != "br":
            t = block_text(child)
            parts.append(" " + t + " ")
            if tag == "a":
                links += len(t)
            else:
                links += sum(len(" ".join(text_of(a).split())) for a in child.iter("a"))
        elif tag == "br" and child.getnext() is not None and child.getnext().tag == "br":
            flush()
        if child.tail:
            parts.append(child.tail)
    flush()


def _candidates(scope) -> list[_Block]:
    """Paragraph-like blocks under scope in document order, each with its ancestor chain."""
    structural: set = set()  # elements with a structural descendant (not text divs)
    for el in scope.iter(*_STRUCTURE):
        node = el.getparent()
        while node is not None and node not in structural:
            structural.add(node)
            node = node.getparent()
    out: list[_Block] = []
    for el in scope.iter(*_CANDIDATE_TAGS, *_LOOSE_TAGS):
        tag = el.tag
        if el in structural and tag in _LOOSE_TAGS:
            _loose_runs(el, scope, structural, out)
        if tag in _BLOCK_TAGS:
            if tag in ("li", "blockquote") and el in structural and el.find(".//p") is not None:
                continue  # its paragraphs are the blocks
        elif tag in _TEXT_DIV_TAGS and el not in structural:
            pass
        else:
            continue
        chain = []
        node = el.getparent()
        while node is not None and node is not scope:
            if node.tag in BOILER_TAGS:
                break  # inside nav/footer/aside/...: never body, skip the text work
            chain.append(node)
            node = node.getparent()
        else:
            chain.append(scope)
            text = block_text(el)
            if not text:
                continue
            n_words = text.count(" ") + 1
            if (tag in _TEXT_DIV_TAGS and n_words < _MIN_TEXT_DIV_WORDS) or (tag == "li" and n_words < 4):
                continue
            out.append(_Block(el, text, chain))
    return out


class _Boiler:
    """Boilerplate verdicts for ancestors, with the majority exception for layout wrappers."""

    def __init__(self, blocks: list[_Block], root) -> None:
        self.chars: dict = {}
        total = 0
        for b in blocks:
            n = b.prose()
            if not n:
                continue
            total += n
            for node in b.chain:
                self.chars[node] = self.chars.get(node, 0) + n
                if node is root:
                    break
        self.total = max(total, 1)
        self.cache: dict = {}

    def excluded(self, node) -> bool:
        hit = self.cache.get(node)
        if hit is None:
            kind = boiler_kind(node)
            if kind is None:
                hit = False
            elif kind == "name":
                hit = self.chars.get(node, 0) * 2 < self.total  # a wrapper holding most text is the body
            else:
                hit = True
            self.cache[node] = hit
        return hit


def _select(blocks: list[_Block], root) -> list[_Block]:
    """The blocks under root that are not inside boilerplate (nor inside another selected block)."""
    inside = [b for b in blocks if b.el is root or root in b.chain]
    boiler = _Boiler(inside, root)
    taken: set = set()
    out = []
    for b in inside:
        ok = True
        for node in b.chain:
            if node is root:
                break
            if node in taken or boiler.excluded(node):
                ok = False
                break
        if not ok or (not b.loose and boiler_kind(b.el, own_block=True) is not None):
            continue
        if (b.loose or b.el.tag in _LINK_CHECKED) and b.link_share() > 0.6:
            continue  # link lists and teaser cards
        out.append(b)
        if not b.loose:
            taken.add(b.el)
    return out


def _densest(blocks: list[_Block]) -> list:
    """Readability-style root: each substantial block scores its parent fully, its grandparent half.

    Returns the roots: the densest element and its qualifying siblings (none when no block qualifies)."""
    boiler = _Boiler(blocks, None)
    score: dict = {}
    clean: dict = {}  # prose characters under each element, boilerplate left out
    for b in blocks:
        n = b.prose()
        if not n or any(boiler.excluded(node) for node in b.chain[:-1]):
            continue
        for node in b.chain:
            clean[node] = clean.get(node, 0) + n
        parent = b.chain[0]
        score[parent] = score.get(parent, 0.0) + n
        if len(b.chain) > 1:
            score[b.chain[1]] = score.get(b.chain[1], 0.0) + n / 2
    if not score:
        return []
    best = max(score.items(), key=lambda kv: kv[1])[0]
    # An article split into sections: from a wrapper that is its parent's only child go up, then
    # take the siblings that hold a fair share of prose themselves (Readability's sibling rule).
    parent = best.getparent()
    while parent is not None and parent is not blocks[0].chain[-1] and len(parent) == 1:
        best, parent = parent, parent.getparent()
    roots = [best]
    if parent is not None and best.tag != "article":  # an <article> is complete in itself
        floor = SIBLING_SHARE * clean.get(best, 0)
        roots = [sib for sib in parent if sib is best or (
            clean.get(sib, 0) >= floor and sib.tag != "article" and boiler_kind(sib) is None)]
    return roots


def measure_body(tree, left_out: bool = False):
    """Our extractor's body and its length in characters (blank lines between blocks not counted);
    `left_out`: also the characters of prose blocks (>= 80 characters each) that the body left out."""
    body = tree.find("body")
    scope = body if body is not None else tree
    blocks = _candidates(scope)
    if not blocks:
        return ("", 0, 0) if left_out else ("", 0)
    if left_out:
        text, n = measure_body(tree)
        chosen = set(text.split("\n\n")) if text else set()
        missed = sum(len(b.text) for b in blocks if b.prose() >= 80 and b.text not in chosen)
        return text, n, missed

    def text_of(roots) -> tuple[str, int]:
        chosen = [b for root in roots for b in _select(blocks, root)]
        return "\n\n".join(b.text for b in chosen), sum(len(b.text) for b in chosen)

    def best_of(roots) -> tuple[str, int]:
        best = ("", 0)
        for r in roots:
            cand = text_of([r])
            if cand[1] > best[1]:
                best = cand
        return best

    # itemprop=articleBody is explicit; <article> is also used for teaser cards, so an <article>
    # that holds much less text than the densest cluster elsewhere loses to that cluster.
    dense_roots = _densest(blocks)
    found = best_of(scope.xpath(".//*[@itemprop='articleBody' or @itemprop='articlebody']"))
    if found[1] == 0:
        found = best_of(scope.iter("article"))
        if dense_roots:
            dense = text_of(dense_roots)
            if dense[1] > 2 * found[1]:
                found = dense
    return found


def own_body(tree) -> tuple[str, bool]:
    """Our extractor's body and whether it is trustworthy (False: hand the page to trafilatura)."""
    text, n = measure_body(tree)
    return text, n >= MIN_TRUSTED_CHARS


def trafilatura_body(html: str, url: str) -> str:
    """trafilatura's full main-content extraction, without its metadata/date search.

    It parses the page itself: it needs lxml.html elements (on plain etree ones it finds nothing)
    and mutates the tree it gets."""
    import trafilatura

    try:
        doc = trafilatura.bare_extraction(
            html,
            url=url,
            with_metadata=False,
            include_comments=False,
            include_images=False,
            include_links=False,
        )
    except Exception:
        return ""
    if doc is None:
        return ""
    text = doc.get("text") if isinstance(doc, dict) else getattr(doc, "text", None)
    # trafilatura separates paragraphs by one newline; ours are blank-line separated.
    return "\n\n".join(line for line in (text or "").split("\n") if line.strip())


def _lean_options(url: str | None):
    """trafilatura's options for the body path: the defaults of `trafilatura_body` (no comments,
    images, links or metadata; balanced focus)."""
    from trafilatura.settings import Extractor

    return Extractor(comments=False, images=False, links=False, with_metadata=False, url=url)


def trafilatura_steps(html: str, url: str, *, readability: bool = True, justext: bool = True,
                      escalation: bool = True, tree=None) -> str:
    """trafilatura's main-content cascade (2.3's `trafilatura_sequence`, comments off), step by step,
    each fallback switchable; all on, it gives `trafilatura_body`'s text (tests hold it to that).

    ``readability``: the readability-lxml comparison; ``justext``: jusText's rescue of short or
    unclean results and its candidate in the recall escalation; ``escalation``: the recall-mode
    retry of a short result that covers little of the page. ``tree``: an lxml.html parse of html to
    use (and mutate) instead of parsing it again."""
    from copy import copy

    from trafilatura import core, external
    from trafilatura.utils import load_html

    try:
        options = _lean_options(url or None)
        if tree is None:
            tree = load_html(html, options.max_file_size)
        if tree is None:
            return ""
        is_forum = core._forum_thread_page(tree)
        tree = core.prune_unwanted_nodes(tree, core.RAW_TREE_PRUNE_XPATH)
        if not is_forum:
            tree = core.prune_unwanted_nodes(tree, core.REMOVE_COMMENTS_AND_LISTS_XPATH)
        cleaned, backup = core._prepare_tree(tree, options, url or None)
        postbody, text = core.extract_content(cleaned, options)
        if readability:
            postbody, text = external.compare_extraction(backup, copy(tree), postbody, text, options)
        elif justext and (postbody.xpath(external.SANITIZED_XPATH) or len(text) < options.min_extracted_size):
            unclean = bool(postbody.xpath(external.SANITIZED_XPATH))
            body2, text2 = external.justext_rescue(backup, options)
            accept = (len(text) <= external.JUSTEXT_OVERRIDE_RATIO * len(text2)) if unclean else len(text) < len(text2)
            if text2 and accept:
                postbody, text = body2, text2
        if len(text) < options.min_extracted_size:
            b_body, b_text, b_len = core.baseline(tree)
            if b_len > len(text):
                postbody, text = b_body, b_text
        if (escalation and 0 < len(text) < core.ESCALATION_MAX_LENGTH
                and len(text) < core.ESCALATION_PAGE_SHARE * len(core.html2txt(tree))):
            r_options = copy(options)
            r_options.focus = "recall"
            if not readability:
                r_options.fast = True  # the retry without the readability comparison either
            r_body, r_text = core._recall_retry(tree, r_options, url or None)
            j_body, j_text = (external.justext_rescue(copy(tree), options) if justext else (None, ""))
            n, r_len, j_len = len(text), len(r_text), len(j_text)
            if j_len > r_len and j_len > core.ESCALATION_JUSTEXT_RATIO * n:
                postbody, text = j_body, j_text
            elif r_len >= options.min_extracted_size and r_len > core.ESCALATION_ACCEPT_RATIO * n:
                postbody, text = r_body, r_text
        if len(text) < options.min_output_size:
            return ""
        out = core.xmltotxt(postbody, options.formatting)
    except Exception:
        return ""
    return "\n\n".join(line for line in (out or "").split("\n") if line.strip())


#: How the body is chosen (`extract_page(..., body_mode=)`; why the default: benchmarks/log/2026-12-01-issue25-second-session.md).
BODY_MODES = ("own", "trafilatura", "longer", "lean", "lean-no-escalation", "cascade")
#: `trafilatura_steps` switches of the trafilatura-based modes (``trafilatura``: every step).
TRAFILATURA_STEPS = {
    "trafilatura": {},
    "lean": {"readability": False},
    "lean-no-escalation": {"readability": False, "escalation": False},
    "cascade": {"readability": False},
}
#: ``cascade``: our body is kept when trustworthy and the prose blocks it left out (each >= 80
#: characters) hold at most this share of its length; other pages go to `lean`.
CASCADE_LEFT_OUT_SHARE = 0.2
#: The default body path (configs/corpus.yaml `extract.body_mode`): trafilatura's main-content
#: extraction, the one that met the quality goal on every held-out set (benchmarks/RESULTS.md, "article bodies").
DEFAULT_BODY_MODE = "trafilatura"


#: trafilatura writes a table as "| cell | cell |" lines; when such lines hold more than this share of
#: its text, it has read a page laid out as a table (navigation cell and all, which it keeps in every
#: mode) and our blocks, which leave out cells of link text, are the body when trustworthy.
LAYOUT_TABLE_SHARE = 0.5


def table_share(text: str) -> float:
    """Share of `text`'s characters on lines that trafilatura wrote as table rows ("| ... |")."""
    if not text:
        return 0.0
    rows = sum(len(line) for line in text.split("\n") if line.lstrip().startswith("|"))
    return rows / len(text)


def article_body(tree, html: str, url: str, use_fallback: bool = True, body_mode: str = DEFAULT_BODY_MODE) -> str:
    """The page's article body (tree: our parse of html).

    ``own``: ours when trustworthy, else trafilatura's when it finds more. ``trafilatura``: trafilatura's
    full extraction on every page, ours where it finds nothing. ``longer``: both on every page, and
    trafilatura's replaces ours when it is `HANDOFF_GAIN` times longer (ours leaves out paragraphs
    more often than it takes in boilerplate)."""
    if body_mode not in BODY_MODES:
        raise ValueError(f"body_mode {body_mode!r}: choose one of {', '.join(BODY_MODES)}")
    if body_mode == "cascade":
        text, n, left_out = measure_body(tree, left_out=True)
        if n >= MIN_TRUSTED_CHARS and left_out <= CASCADE_LEFT_OUT_SHARE * n:
            return text
    if body_mode in TRAFILATURA_STEPS:
        steps = TRAFILATURA_STEPS[body_mode]
        alt = trafilatura_steps(html, url, **steps) if steps else trafilatura_body(html, url)
        if alt.strip() and table_share(alt) <= LAYOUT_TABLE_SHARE:
            return alt
        text, trusted = own_body(tree)
        return text if (trusted or not alt.strip()) else alt
    text, trusted = own_body(tree)
    if body_mode == "own" and (trusted or not use_fallback):
        return text
    alt = trafilatura_body(html, url)
    return alt if len(alt) > HANDOFF_GAIN * len(text) else text
