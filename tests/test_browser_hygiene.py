"""The browser tests leave no database connection behind: no ORM call in the body of a test, or of a
fixture, that takes the `browser` fixture (which runs Playwright's event loop in the test's thread).

Such a call opens a connection in another async context that nothing closes, and at the end of the
suite PostgreSQL refuses to drop the test database ("being accessed by other users"; seen in every
CI run until two tests moved their rows into fixtures). Rows are made in fixtures that run before
`browser`, or read mid-test on a thread of their own that closes its connection
(`test_browser_invited_rater._in_thread`, whose lambdas this check leaves alone).
"""
import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# The ORM's ways in: a manager, an instance written or read again, a user made by the auth manager.
ORM_ATTRIBUTES = {"objects", "save", "refresh_from_db", "create_user"}


def _own_nodes(function: ast.FunctionDef):
    """The nodes of the function's body, without those of lambdas and nested functions (run elsewhere)."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def orm_calls_beside_the_browser(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        # Tests and fixtures alike: a fixture's body that runs after `browser` runs in its loop too.
        if isinstance(node, ast.FunctionDef) and any(arg.arg == "browser" for arg in node.args.args):
            for inner in _own_nodes(node):
                if isinstance(inner, ast.Attribute) and inner.attr in ORM_ATTRIBUTES:
                    found.append(f"{path.name}:{inner.lineno} {node.name}: .{inner.attr}")
    return found


def test_the_check_finds_an_orm_call_in_a_browser_test(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("def test_x(live_server, browser):\n    User.objects.get(pk=1)\n"
                      "    _in_thread(lambda: User.objects.get(pk=1))\n")
    assert orm_calls_beside_the_browser(sample) == ["test_sample.py:2 test_x: .objects"]


def test_the_check_finds_an_orm_call_in_a_fixture_that_takes_the_browser(tmp_path):
    sample = tmp_path / "test_sample.py"
    sample.write_text("@pytest.fixture\ndef signed_in(browser, owner):\n    owner.refresh_from_db()\n"
                      "    return browser.new_page()\n\n\n@pytest.fixture\ndef rows():\n    Run.objects.create()\n")
    assert orm_calls_beside_the_browser(sample) == ["test_sample.py:3 signed_in: .refresh_from_db"]


def test_no_browser_test_calls_the_orm_while_playwright_runs():
    found = [hit for path in sorted(TESTS.glob("test_*.py")) for hit in orm_calls_beside_the_browser(path)]
    assert not found, found
