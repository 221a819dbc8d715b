"""Options structs from keyword arguments, starting from the C defaults (*_options_init)."""
from ._lib import lib

__all__ = ["make_options", "enum_value"]


def enum_value(value, names, what):
    """An enum given as an int or as one of `names` (a dict name -> value)."""
    if isinstance(value, str):
        key = value.lower()
        if key not in names:
            raise ValueError(f"{what}: {value!r} is not one of {', '.join(names)}")
        return names[key]
    if isinstance(value, bool) or not isinstance(value, int) or value not in names.values():
        raise ValueError(f"{what}: {value!r} is not one of {', '.join(names)} "
                         f"(or {sorted(names.values())})")
    return value


def make_options(struct, init_name, kwargs, convert=None, skip=()):
    """A `struct` filled by the C function `init_name`, then the keyword arguments set by
    field name (converted by convert[name] when given). Unknown names raise TypeError."""
    opts = struct()
    getattr(lib, init_name)(opts)
    fields = [f[0] for f in struct._fields_ if f[0] != "size" and f[0] not in skip]
    convert = convert or {}
    for key, value in kwargs.items():
        if key not in fields:
            raise TypeError(f"unknown option {key!r}; expected one of: {', '.join(fields)}")
        if key in convert:
            value = convert[key](value)
        elif isinstance(value, bool):
            value = int(value)
        try:
            setattr(opts, key, value)
        except TypeError as e:
            raise TypeError(f"option {key}: {e}") from None
    return opts


def defaults(struct, init_name):
    """The C defaults of an options struct as a dict (size excluded)."""
    opts = struct()
    getattr(lib, init_name)(opts)
    return {f[0]: getattr(opts, f[0]) for f in struct._fields_ if f[0] != "size"}
