"""
`Reads`: a public read-only attribute that reads a private one.

The package shows state (a handle's ``owner`` and ``ended``, an invocation's
``id`` and what its spec holds, a pipeline's transformers) as read-only
attributes over private slots. Written as
``@property`` methods, each is four lines saying ``return self._x`` and a
Python frame per read; `Reads` says it in one line and reads at C speed (a
`property` over `operator.attrgetter`, which follows dotted paths such as
``"_spec.name"``). For type checkers it is a generic descriptor: an instance
attribute annotated ``Reads[T]`` reads as ``T``, and assigning to it is an
error on the slotted classes that use it.
"""

from __future__ import annotations

from operator import attrgetter
from types import GenericAlias
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

__all__ = ("Reads",)

T = TypeVar("T")

if TYPE_CHECKING:

    class Reads(Generic[T]):
        """A read-only attribute that reads *private* (a dotted path) of its instance."""

        def __init__(self, private: str, doc: str) -> None: ...

        @overload
        def __get__(self, instance: None, owner: type[Any] | None = None) -> Reads[T]: ...

        @overload
        def __get__(self, instance: object, owner: type[Any] | None = None) -> T: ...

        def __get__(self, instance: object, owner: type[Any] | None = None) -> Any: ...

else:

    class Reads(property):
        """A read-only attribute that reads *private* (a dotted path) of its instance."""

        def __init__(self, private, doc):
            super().__init__(attrgetter(private))
            self.__doc__ = doc

        # ``Reads[str]`` where an annotation is evaluated (`typing.get_type_hints`), as the
        # builtin containers spell it.
        __class_getitem__ = classmethod(GenericAlias)
