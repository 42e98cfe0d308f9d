"""Per-language files for the syntax tests: a clean file and two independent breakages.

Each case's ``clean`` text parses without error; ``first`` breaks it at
``first_line``; ``second`` (applied after ``first``) breaks it again,
elsewhere, at ``second_line``. The edits are ``(old_string, new_string)``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LanguageCase:
    language: str
    filename: str
    clean: str
    first: tuple[str, str]
    first_line: int
    second: tuple[str, str]
    second_line: int


_C_LIKE = "int one(int a) {\n  return a + 1;\n}\n\nint two(int b) {\n  return b * 2;\n}\n"

CASES: list[LanguageCase] = [
    LanguageCase(
        "python",
        "mod.py",
        "def one(a):\n    return a + 1\n\n\ndef two(b):\n    return b * 2\n",
        ("return a + 1", "return a +* 1"),
        2,
        ("return b * 2", "return b ** * 2"),
        6,
    ),
    LanguageCase(
        "javascript",
        "mod.js",
        "function one(a) {\n  return a + 1;\n}\n\nfunction two(b) {\n  return b * 2;\n}\n",
        ("return a + 1;", "return a + ;"),
        2,
        ("return b * 2;", "return b * ;"),
        6,
    ),
    LanguageCase(
        "typescript",
        "mod.ts",
        "function one(a: number): number {\n  return a + 1;\n}\n\n"
        "function two(b: number): number {\n  return b * 2;\n}\n\nexport { one, two };\n",
        ("return a + 1;", "return a + ;"),
        2,
        ("return b * 2;", "return b * ;"),
        6,
    ),
    LanguageCase(
        "tsx",
        "view.tsx",
        "export function One() {\n  return <div>one</div>;\n}\n\n"
        "export function Two() {\n  return <div>two</div>;\n}\n",
        ("return <div>one</div>;", "return <div>one</div>);"),
        2,
        ("return <div>two</div>;", "return <div>two</div>);"),
        6,
    ),
    LanguageCase(
        "json",
        "data.json",
        '{\n  "one": 1,\n  "two": 2,\n  "three": [1, 2]\n}\n',
        ('"one": 1,', '"one": ,'),
        2,
        ('"three": [1, 2]', '"three": [1, 2'),
        4,
    ),
    LanguageCase(
        "yaml",
        "conf.yaml",
        "one: 1\ntwo: [a, b]\n---\nthree: x\nfour: [c, d]\n",
        ("one: 1", "one: 1: 2"),
        1,
        ("three: x", "three: x: y"),
        4,
    ),
    LanguageCase(
        "toml",
        "conf.toml",
        "[one]\na = 1\n\n[two]\nb = 2\n",
        ("a = 1", "a = "),
        2,
        ("b = 2", "b = "),
        5,
    ),
    LanguageCase(
        "go",
        "main.go",
        "package main\n\nfunc one(a int) int {\n\treturn a + 1\n}\n\n"
        "func two(b int) int {\n\treturn b * 2\n}\n",
        ("return a + 1", "return a + )"),
        4,
        ("return b * 2", "return b * )"),
        8,
    ),
    LanguageCase(
        "rust",
        "lib.rs",
        "fn one(a: i32) -> i32 {\n    a + 1\n}\n\nfn two(b: i32) -> i32 {\n    b * 2\n}\n",
        ("a + 1", "a + )"),
        2,
        ("b * 2", "b * )"),
        6,
    ),
    LanguageCase(
        "bash",
        "run.sh",
        "set -e\necho one\n\nif true; then\n  echo two\nfi\n\necho three\n",
        ("echo one", "echo one )"),
        2,
        ("echo three", "echo three )"),
        8,
    ),
    LanguageCase(
        "c",
        "one.c",
        _C_LIKE,
        ("return a + 1;", "return a + ;"),
        2,
        ("return b * 2;", "return b * ;"),
        6,
    ),
    LanguageCase(
        "cpp",
        "one.cpp",
        _C_LIKE,
        ("return a + 1;", "return a + ;"),
        2,
        ("return b * 2;", "return b * ;"),
        6,
    ),
    LanguageCase(
        "java",
        "A.java",
        "class A {\n  int one(int a) {\n    return a + 1;\n  }\n\n"
        "  int two(int b) {\n    return b * 2;\n  }\n}\n",
        ("return a + 1;", "return a + ;"),
        3,
        ("return b * 2;", "return b * ;"),
        7,
    ),
]
