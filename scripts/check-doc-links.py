#!/usr/bin/env python3
"""Checks the links of the rendered docs of our crates (after `cargo doc
--workspace --no-deps`): every relative link leads to a file that exists
(the attribute's docs link into redlock_runtime from redlock_macros), and no
link points to a docs.rs page of ours (it does not exist before a release)
or to an example.invalid address.

Usage: check-doc-links.py <target-dir>/doc
"""
import html.parser
import os
import sys

CRATES = ["redlock_runtime", "redlock_axum", "redlock_macros"]
FORBIDDEN = ["docs.rs/redlock", "example.invalid"]


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            for name, value in attrs:
                if name == "href" and value:
                    self.hrefs.append(value)


def main():
    doc = sys.argv[1] if len(sys.argv) > 1 else "target/doc"
    problems = []
    checked = 0
    for crate in CRATES:
        root = os.path.join(doc, crate)
        if not os.path.isdir(root):
            problems.append(f"{root}: not rendered (run cargo doc --workspace --no-deps first)")
            continue
        for folder, _, files in os.walk(root):
            for name in files:
                if not name.endswith(".html"):
                    continue
                page = os.path.join(folder, name)
                with open(page, encoding="utf-8") as f:
                    text = f.read()
                if "<title>Redirection</title>" in text:
                    continue
                # Only the item's own docs: the trait implementations below
                # them show foreign crates' docs (blanket impls), whose
                # unresolved links are not ours to fix.
                for heading in ('id="trait-implementations"', 'id="synthetic-implementations"',
                                'id="blanket-implementations"'):
                    cut = text.find(heading)
                    if cut != -1:
                        text = text[:cut]
                parser = Links()
                parser.feed(text)
                for href in parser.hrefs:
                    if any(bad in href for bad in FORBIDDEN):
                        problems.append(f"{page}: links to {href}")
                        continue
                    if href.startswith(("http:", "https:", "#", "javascript:", "mailto:")):
                        continue
                    target = href.split("#", 1)[0].split("?", 1)[0]
                    if not target:
                        continue
                    checked += 1
                    path = os.path.normpath(os.path.join(folder, target))
                    if not os.path.exists(path):
                        hint = ""
                        if "::" in href:
                            hint = (" (rustdoc wrote the link's raw text: the linked crate's docs "
                                    "were not in the doc folder when this crate was documented)")
                        problems.append(f"{page}: broken link {href}{hint}")
    for problem in problems:
        print(problem)
    if problems:
        sys.exit(f"{len(problems)} bad doc link(s)")
    print(f"ok: {checked} relative doc links resolve, none to docs.rs pages of ours")


main()
