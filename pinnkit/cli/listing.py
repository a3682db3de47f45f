"""``pinnkit problems``: the built-in problems, their parameters and a plain-text summary
of each (the first paragraph of its docstring, with a displayed equation it introduces,
LaTeX turned into Unicode text for a terminal)."""

from __future__ import annotations

import inspect
import re
import textwrap

_SYMBOLS = {
    "times": "×", "cdot": "·", "pm": "±", "mp": "∓", "le": "≤", "ge": "≥", "leq": "≤", "geq": "≥",
    "infty": "∞", "partial": "∂", "nabla": "∇", "Delta": "Δ", "alpha": "α", "beta": "β", "gamma": "γ",
    "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "zeta": "ζ", "theta": "θ", "kappa": "κ",
    "lambda": "λ", "mu": "μ", "nu": "ν", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ",
    "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω", "Omega": "Ω", "Phi": "Φ", "Psi": "Ψ",
    "ell": "ℓ", "to": "→", "mapsto": "↦", "approx": "≈", "sim": "~", "int": "∫", "sum": "Σ",
    # \x01: a space if a letter or digit precedes (x\sin y -> x sin y), else nothing
    "sin": "\x01sin ", "cos": "\x01cos ", "exp": "\x01exp ", "log": "\x01log ", "tanh": "\x01tanh ",
    "sqrt": "√",
    "quad": "  ", "qquad": "   ", "left": "", "right": "", "big": "", "Big": "",
}
_BY_LENGTH = sorted(_SYMBOLS, key=len, reverse=True)
_SUPER = str.maketrans("0123456789+-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻")


def _command(word: str) -> str:
    """A LaTeX command, also when the letters of what follows it ran into its name once
    ``\\mathbf v`` lost its backslash (``\\timesn`` is ``\\times n``)."""
    if word in _SYMBOLS:
        return _SYMBOLS[word]
    for name in _BY_LENGTH:
        if word.startswith(name):
            return _SYMBOLS[name] + " " + word[len(name):]
    return word


def plain(text: str) -> str:
    """Docstring markup to terminal text: inline and display LaTeX (``$...$``,
    ``$$...$$``), reST literals and emphasis. Covers what pinnkit's docstrings use; an
    unknown command keeps its name without the backslash."""
    s = text.replace("$$", " ").replace("$", "")
    s = re.sub(r"\\t?frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)", s)
    s = re.sub(r"\\tfrac(\d)(\d)", r"\1/\2", s)
    s = re.sub(r"\\(?:text|mathrm|mathbf|operatorname|boldsymbol)\s*\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\hat\{\\mathbf (\w)\}|\\hat\{(\w)\}", lambda m: (m.group(1) or m.group(2)) + "\u0302", s)
    s = re.sub(r"\\mathbf\s+(\w)", r"\1", s)
    s = re.sub(r"\\[,;:! ]", " ", s)
    s = re.sub(r"\\([A-Za-z]+)", lambda m: _command(m.group(1)), s)
    s = re.sub(r"(?<=[\w)}\]])\x01", " ", s).replace("\x01", "")
    s = re.sub(r"\^\{([0-9+-]+)\}|\^([0-9])", lambda m: (m.group(1) or m.group(2)).translate(_SUPER), s)
    s = re.sub(r"\^\{([^{}]*)\}", r"^(\1)", s)
    s = s.replace("{", "").replace("}", "")
    s = re.sub(r"``([^`]*)``|`([^`]*)`", lambda m: m.group(1) if m.group(1) is not None else m.group(2), s)
    s = re.sub(r"\*\*([^*]*)\*\*", r"\1", s)
    return " ".join(s.split())


def describe(factory) -> str:
    """The summary of a problem factory (module docstring), as plain text."""
    paras = [p.strip() for p in (inspect.getdoc(factory) or "").split("\n\n")]
    first = paras[0] if paras else ""
    # A first paragraph that introduces a displayed equation ("...,", "...:") gets it.
    if first.endswith((":", ",")) and len(paras) > 1 and paras[1].startswith("$$"):
        first = f"{first} {paras[1]}"
    text = plain(first)
    return text.rstrip(",:") + ("" if text.endswith(".") else ".") if text else ""


def cmd_problems(args) -> int:
    from ..problems import PROBLEMS

    for name, factory in sorted(PROBLEMS.items()):
        params = ", ".join(
            f"{p.name}={p.default!r}" if p.default is not p.empty else p.name
            for p in inspect.signature(factory).parameters.values()
        )
        print(f"{name}({params})")
        print(textwrap.indent(textwrap.fill(describe(factory), 88), "    "))
    return 0
