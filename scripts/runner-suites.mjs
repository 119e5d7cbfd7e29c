// The small suites of the runner corpus (scripts/capture-runner-output.mjs --corpus) and of the
// structured-report bench (bench/test-reports-bench.ts): the same tests in each runner's own API.
//   main   math (a pass, a nested suite, a failing test, a skipped test), names (titles with `#`,
//          `\`, quotes and unicode), load (a file that throws while loading);
//   hang   a test that waits forever on a socket;   crash  a test that ends the process (code 3);
//   spin   (node-tap only) a test that never yields (a loop), so only killing its file stops it.
// FIXED=1 in the environment fixes all of them.

const FIXED_JS = `process.env.FIXED === '1'`;

/** The tests, per JS API. `t(name, body)`, `suite(name, inner)`, `skip(name)`. */
const JS_APIS = {
  jest: { head: '', suite: 'describe', test: 'test', skip: 'test.skip', esm: false },
  vitest: {
    head: "import { describe, test } from 'vitest';\n",
    suite: 'describe',
    test: 'test',
    skip: 'test.skip',
    esm: true,
  },
  mocha: { head: '', suite: 'describe', test: 'it', skip: 'it.skip', esm: false },
  'node-test': {
    head: "const { describe, test } = require('node:test');\n",
    suite: 'describe',
    test: 'test',
    skip: 'test.skip',
    esm: false,
  },
};

function assertLine(expr) {
  return `if (!(${expr})) throw new Error('assertion failed: ${expr.replace(/'/g, "\\'")}');`;
}

const HANG_BODY = `const net = require('node:net');
    const server = net.createServer(() => {});
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const socket = net.connect(server.address().port, '127.0.0.1');
    await new Promise((resolve) => socket.on('data', resolve));`;

export function jsFiles(runner) {
  if (runner === 'tap') return tapFiles();
  if (runner === 'ava') return avaFiles();
  const api = JS_APIS[runner];
  const req = (mod) =>
    api.esm ? `const ${mod} = await import('node:${mod}');` : `const ${mod} = require('node:${mod}');`;
  const hangBody = api.esm
    ? HANG_BODY.replace("const net = require('node:net');", "const net = await import('node:net');")
    : HANG_BODY;
  void req;
  const T = api.test;
  return {
    math: `${api.head}${api.suite}('math', () => {
  ${T}('adds', () => {
    ${assertLine('1 + 1 === 2')}
  });
  ${api.suite}('nested', () => {
    ${T}('multiplies', () => {
      ${assertLine('2 * 3 === 6')}
    });
  });
  ${T}('divides with rounding', () => {
    ${assertLine(`Math.round(7 / 2) === (${FIXED_JS} ? 4 : 3)`)}
  });
  ${api.skip}('skipped for now', () => {});
});
`,
    names: `${api.head}${api.suite}('names # hash', () => {
  ${T}('back\\\\slash "quotes" ünï ✓ 日本語', () => {});
  ${T}("it's 'single'", () => {});
});

${T}('top # not a directive', () => {});
`,
    load: `${api.head}if (!(${FIXED_JS})) throw new Error('cannot load: a module is missing');

${T}('loads after the fix', () => {});
`,
    hang: `${api.head}${T}('quick', () => {});

${T}('waits on a socket', async () => {
  if (!(${FIXED_JS})) {
    ${hangBody}
  }
});
`,
    crash: `${api.head}${T}('before the crash', () => {});

${T}('crashes the process', () => {
  if (!(${FIXED_JS})) process.exit(3);
});
`,
  };
}

export function tapFiles() {
  const head = "const t = require('tap');\n";
  return {
    math: `${head}t.test('math', async (t) => {
  t.test('adds', async (t) => {
    t.equal(1 + 1, 2);
  });
  t.test('nested', async (t) => {
    t.test('multiplies', async (t) => {
      t.equal(2 * 3, 6);
    });
  });
  t.test('divides with rounding', async (t) => {
    t.equal(Math.round(7 / 2), ${FIXED_JS} ? 4 : 3);
  });
  t.test('skipped for now', { skip: true }, async () => {});
});
`,
    names: `${head}t.test('names # hash', async (t) => {
  t.test('back\\\\slash "quotes" ünï ✓ 日本語', async (t) => {
    t.pass('ok');
  });
  t.test("it's 'single'", async (t) => {
    t.pass('ok');
  });
});
t.test('top # not a directive', async (t) => {
  t.pass('ok');
});
`,
    load: `${head}if (!(${FIXED_JS})) throw new Error('cannot load: a module is missing');
t.test('loads after the fix', async (t) => {
  t.pass('ok');
});
`,
    hang: `${head}t.test('quick', async (t) => {
  t.pass('ok');
});
t.test('waits on a socket', async (t) => {
  if (!(${FIXED_JS})) {
    ${HANG_BODY}
  }
  t.pass('ok');
});
`,
    crash: `${head}t.test('before the crash', async (t) => {
  t.pass('ok');
});
t.test('crashes the process', async (t) => {
  if (!(${FIXED_JS})) process.exit(3);
  t.pass('ok');
});
`,
    spin: `${head}t.test('quick', async (t) => {
  t.pass('ok');
});
t.test('spins forever', async (t) => {
  if (!(${FIXED_JS})) for (;;);
  t.pass('ok');
});
`,
  };
}

export function avaFiles() {
  const head = "const test = require('ava');\n";
  return {
    math: `${head}test('math: adds', (t) => {
  t.is(1 + 1, 2);
});
test('math: nested: multiplies', (t) => {
  t.is(2 * 3, 6);
});
test('math: divides with rounding', (t) => {
  t.is(Math.round(7 / 2), ${FIXED_JS} ? 4 : 3);
});
test.skip('math: skipped for now', () => {});
`,
    names: `${head}test('names # hash: back\\\\slash "quotes" ünï ✓ 日本語', (t) => {
  t.pass();
});
test("names # hash: it's 'single'", (t) => {
  t.pass();
});
`,
    load: `${head}if (!(${FIXED_JS})) throw new Error('cannot load: a module is missing');
test('loads after the fix', (t) => {
  t.pass();
});
`,
    hang: `${head}test('quick', (t) => {
  t.pass();
});
test('waits on a socket', async (t) => {
  if (!(${FIXED_JS})) {
    ${HANG_BODY}
  }
  t.pass();
});
`,
    crash: `${head}test('before the crash', (t) => {
  t.pass();
});
test('crashes the process', (t) => {
  if (!(${FIXED_JS})) process.exit(3);
  t.pass();
});
`,
  };
}

const PY_FIXED = `os.environ.get("FIXED") == "1"`;
const PY_HANG = `    if not ${PY_FIXED}:
        server = socket.socket()
        server.bind(("127.0.0.1", 0))
        server.listen()
        client = socket.create_connection(server.getsockname())
        client.recv(1)
`;

export function pytestFiles() {
  return {
    math: `import os

import pytest


class TestMath:
    def test_adds(self):
        assert 1 + 1 == 2

    class TestNested:
        def test_multiplies(self):
            assert 2 * 3 == 6

    def test_divides_with_rounding(self):
        assert round(7 / 2) == (4 if ${PY_FIXED} else 3)

    @pytest.mark.skip(reason="later")
    def test_skipped_for_now(self):
        pass

    @pytest.mark.xfail(reason="a known bug")
    def test_known_failure(self):
        assert False
`,
    names: `import pytest


@pytest.mark.parametrize("value", ["a#b", "back\\\\slash", "q'uote \\"dq\\"", "ünï ✓ 日本語"])
def test_names(value):
    assert value
`,
    load: `import os

if not ${PY_FIXED}:
    raise RuntimeError("cannot load: a module is missing")


def test_loads_after_the_fix():
    pass
`,
    hang: `import os
import socket


def test_quick():
    pass


def test_waits_on_a_socket():
${PY_HANG}`,
    crash: `import os


def test_before_the_crash():
    pass


def test_crashes_the_process():
    if not ${PY_FIXED}:
        os._exit(3)
`,
  };
}

export function unittestFiles() {
  return {
    math: `import os
import unittest


class TestMath(unittest.TestCase):
    def test_adds(self):
        self.assertEqual(1 + 1, 2)

    def test_divides_with_rounding(self):
        self.assertEqual(round(7 / 2), 4 if ${PY_FIXED} else 3)

    @unittest.skip("later")
    def test_skipped_for_now(self):
        pass


class TestNested(unittest.TestCase):
    def test_multiplies(self):
        self.assertEqual(2 * 3, 6)
`,
    names: `import unittest


class TestNames(unittest.TestCase):
    def test_ünï_日本語(self):
        """A docstring: its first line replaces the name on the result line."""
        for value in ["a#b", "back\\\\slash", "q'uote"]:
            with self.subTest(value=value):
                self.assertTrue(value)
`,
    load: `import os

if not ${PY_FIXED}:
    raise RuntimeError("cannot load: a module is missing")
import unittest


class TestLoad(unittest.TestCase):
    def test_loads_after_the_fix(self):
        pass
`,
    hang: `import os
import socket
import unittest


class TestHang(unittest.TestCase):
    def test_quick(self):
        pass

    def test_waits_on_a_socket(self):
${PY_HANG.replace(/^ {4}/gm, '        ')}`,
    crash: `import os
import unittest


class TestCrash(unittest.TestCase):
    def test_before_the_crash(self):
        pass

    def test_crashes_the_process(self):
        if not ${PY_FIXED}:
            os._exit(3)
`,
  };
}

export function goFiles() {
  const fixed = 'os.Getenv("FIXED") == "1"';
  return {
    'go.mod': 'module example.com/corpus\n\ngo 1.19\n',
    math: `package corpus

import (
	"os"
	"testing"
)

func TestAdds(t *testing.T) {
	if 1+1 != 2 {
		t.Fatal("1 + 1")
	}
}

func TestNested(t *testing.T) {
	t.Run("multiplies", func(t *testing.T) {})
	t.Run("back\\\\slash #hash 'q' ünï", func(t *testing.T) {})
}

func TestDividesWithRounding(t *testing.T) {
	want := 3
	if ${fixed} {
		want = 4
	}
	if got := (7 + 1) / 2; got != want {
		t.Errorf("got %d, want %d", got, want)
	}
}

func TestSkipped(t *testing.T) {
	t.Skip("later")
}
`,
    load: `package broken

func Broken() int {
	return "not an int"
}
`,
    hang: `package corpus

import (
	"net"
	"os"
	"testing"
)

func TestQuick(t *testing.T) {}

func TestWaitsOnASocket(t *testing.T) {
	if ${fixed} {
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	_, _ = c.Read(buf)
}
`,
    crash: `package corpus

import (
	"os"
	"testing"
)

func TestBeforeTheCrash(t *testing.T) {}

func TestCrashesTheProcess(t *testing.T) {
	if !(${fixed}) {
		os.Exit(3)
	}
}
`,
  };
}

export function cargoFiles(scenario) {
  const fixed = 'std::env::var("FIXED").as_deref() == Ok("1")';
  const extra = {
    main: `
    #[test]
    fn divides_with_rounding() {
        let want = if ${fixed} { 4 } else { 3 };
        assert_eq!((7 + 1) / 2, want);
    }

    #[test]
    #[ignore]
    fn skipped_for_now() {}
`,
    hang: `
    #[test]
    fn waits_on_a_socket() {
        if ${fixed} {
            return;
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _ = listener.accept();
    }
`,
    crash: `
    #[test]
    fn crashes_the_process() {
        if !(${fixed}) {
            std::process::exit(3);
        }
    }
`,
  }[scenario];
  return {
    'Cargo.toml': '[package]\nname = "corpus"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n',
    'src/lib.rs': `/// Adds.
///
/// \`\`\`
/// assert_eq!(corpus::add(1, 1), 2);
/// \`\`\`
pub fn add(a: u32, b: u32) -> u32 {
    a + b
}

#[cfg(test)]
mod tests {
    #[test]
    fn adds() {
        assert_eq!(super::add(1, 1), 2);
    }

    mod nested {
        #[test]
        fn multiplies() {
            assert_eq!(2 * 3, 6);
        }
    }
${extra}}
`,
    'tests/api.rs': `#[test]
fn api_adds() {
    assert_eq!(corpus::add(2, 2), 4);
}
`,
  };
}
