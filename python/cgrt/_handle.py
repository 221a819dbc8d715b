"""Base of every handle class: explicit close, context manager, finalizer, and children
closed before their parent."""
import weakref

from ._errors import InvalidHandleError

__all__ = ["Handle"]


def _destroy(destroy, ptr, *keep):
    """Finalizer body: runs once (close(), garbage collection or interpreter exit).
    `keep` holds what must outlive the C object (callbacks, buffers) until now."""
    try:
        destroy(ptr)
    except Exception:  # teardown failures are logged by cgrt; nothing to raise into
        pass


class Handle:
    """A cgrt handle owned by Python.

    ``close()`` (also ``with ... :`` and garbage collection, through
    ``weakref.finalize``) destroys the C object once. A child (event, plan, graph set,
    module, allocation, registration) keeps its parent alive while it lives, and a parent
    closes its live children first, newest first, so a runtime is never destroyed under
    them; at interpreter exit the finalizers run newest first as well.
    """

    _kind = "handle"

    def __init__(self, ptr, destroy, parent=None, keep=()):
        self._ptr = ptr
        self._parent = parent
        self._children = []  # weak references, creation order
        self._finalizer = weakref.finalize(self, _destroy, destroy, ptr, *keep)
        if parent is not None:
            parent._adopt(self)

    def _adopt(self, child):
        self._children = [r for r in self._children if r() is not None]
        self._children.append(weakref.ref(child))

    @property
    def closed(self):
        return not self._finalizer.alive

    @property
    def handle(self):
        """The C pointer (an int); raises InvalidHandleError once closed."""
        if not self._finalizer.alive:
            raise InvalidHandleError(f"this {self._kind} is closed")
        return self._ptr

    def close(self):
        """Destroys the C object (children first). A second close is a no-op."""
        if not self._finalizer.alive:
            return
        for ref in reversed(self._children):
            child = ref()
            if child is not None:
                child.close()
        self._children = []
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self.closed else f"0x{self._ptr:x}"
        return f"<cgrt.{type(self).__name__} {state}>"
