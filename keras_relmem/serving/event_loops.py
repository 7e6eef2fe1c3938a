"""The event loop the asynchronous front ends (REST, and gRPC with batching) run on.

uvloop (libuv under asyncio's interface) runs the same coroutines with less
Python work per callback and per socket event than asyncio's own loop. Both
front ends spend most of their event-loop time in such callbacks (gRPC's
asyncio server schedules several per call), so under concurrent load with
batching on the server answers more requests/s on uvloop (the serving
results compare both loops in alternated rounds, `bench.serving_event_loops`).

`auto` (the server's default) takes uvloop where it is installed (it comes with
`keras-relmem[serving]` on Linux and macOS) and asyncio's loop otherwise.

Example:

```python
resolve("auto")   # "uvloop" where installed, else "asyncio"
loop = new_event_loop("auto")
```
"""

import asyncio

EVENT_LOOPS = ("auto", "uvloop", "asyncio")


def resolve(kind="auto"):
    """The loop `kind` stands for here: "uvloop" or "asyncio".

    Args:
        kind: "uvloop", "asyncio", or "auto" (uvloop when it can be imported).

    Raises:
        ValueError: an unknown kind, or "uvloop" where uvloop is not installed.
    """
    if kind not in EVENT_LOOPS:
        raise ValueError(f"event loop must be one of {', '.join(EVENT_LOOPS)}; got {kind!r}")
    if kind == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401 (whether it imports is the question)
    except ImportError:
        if kind == "uvloop":
            raise ValueError(
                "--event_loop=uvloop needs the uvloop package: pip install uvloop "
                "(it comes with keras-relmem[serving] on Linux and macOS)"
            ) from None
        return "asyncio"
    return "uvloop"


def new_event_loop(kind="auto"):
    """A new event loop of `kind` (one of `EVENT_LOOPS`, as `resolve` reads it).

    Raises:
        ValueError: as `resolve`.
    """
    if resolve(kind) == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()
