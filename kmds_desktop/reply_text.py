"""What the readers of a model's reply share: the fenced blocks it may wrap its JSON in.

A bottom-layer module (it imports nothing of the project), so the router (``ask``) and the screening
scores (``literature``) find fences the same way, in linear time whatever the reply holds.
"""

from __future__ import annotations

import re

_FENCE = re.compile("```")
#: A fenced block's language tag (```json): not part of the block.
_FENCE_TAG = re.compile(r"[a-zA-Z0-9_-]*")


def fenced_blocks(reply: str, most: int) -> list[str]:
    """The text of the first ``most`` fenced blocks (```json ... ```), language tag and leading white
    space left out, in one pass over the reply. A pattern with the white space before a lazy body
    backtracked into it: an unclosed fence before 40,000 spaces took 4 s. The fences are found by
    ``re``'s literal search, which ``str.find`` is slower than on a long run of one character."""
    blocks: list[str] = []
    opening = _FENCE.search(reply)
    while opening is not None and len(blocks) < most:
        closing = _FENCE.search(reply, opening.end())
        if closing is None:
            break
        body = reply[opening.end():closing.start()]
        tag = _FENCE_TAG.match(body)
        blocks.append(body[tag.end() if tag else 0:].lstrip())
        opening = _FENCE.search(reply, closing.end())
    return blocks
