// Package readonly decides whether a shell command only reads, so that the
// supervised tier can run it without asking on every vendor (SUP-1).
//
// It is a security boundary: the command comes from an agent, which is
// untrusted and may try to pass a write off as a read. Whenever the answer
// is not certain it is false, and the command is asked about.
//
// A command line is read-only when it parses as bash into one or more simple
// commands joined by &&, ||, ;, newlines or pipes (| and |&), every one of
// them a command of the table below with arguments the table allows, and
//
//   - the command name is a plain word: no quotes, escapes, expansions or
//     slashes (so no ./ls or /bin/ls, which may be the agent's own program);
//   - no command has a variable assignment prefix (FOO=1 ls), is negated
//     (! ls) or runs in the background (ls &);
//   - every argument is plain text after quote removal: literals, '…' and
//     "…" without expansions. Parameter, command, process and arithmetic
//     expansion, $'…', $"…", brace expansion ({a,b}) and extended globs are
//     refused wherever they appear, since their value is not known until the
//     shell runs. Globs (*, ?, […]) are accepted; for every command except
//     those accepting any arguments, only when what they match cannot start
//     with "-", so that a file named like an option cannot become one;
//   - redirections are limited to reading a file (< FILE, but not a /dev/
//     file other than /dev/null: bash opens /dev/tcp/… as a network
//     connection), output to /dev/null (>, >>, >|, &>, &>> and >&, with an
//     optional file descriptor number) and duplicating stdout or stderr
//     (2>&1, >&2);
//   - there are no here-documents or here-strings, subshells, blocks,
//     functions, conditionals, loops, [[ ]], (( )), let, declare or time.
//
// The commands, and the forms accepted (an option "rejected" is refused in
// full, bundled with other short options, or as any abbreviation GNU
// getopt_long or git would accept):
//
//	basename, cat, cmp, cut, df, diff,      any arguments
//	dirname, du, echo, egrep, false, fgrep,
//	grep, head, id, jq, ls, nl, pwd,
//	readlink, realpath, stat, tail, tr,
//	true, type, uname, wc, which, whoami
//	date                                    no -s/--set; operands only +FORMAT
//	file                                    no -C/--compile
//	find                                    no -exec, -execdir, -ok, -okdir,
//	                                        -delete, -fprint, -fprint0,
//	                                        -fprintf, -fls
//	printf                                  no -v
//	rg                                      no --pre, --pre-glob, --hostname-bin
//	sed                                     only sed -n SCRIPT [FILE…], SCRIPT of
//	                                        digits , $ and p (sed -n 1,20p f)
//	sort                                    no -o/--output, --compress-program
//	tree                                    no -o, -R
//	uniq                                    at most one operand (a second one is
//	                                        the output file)
//	git [-C DIR] [--no-pager|-P] [--no-optional-locks] SUBCOMMAND, where
//	SUBCOMMAND is one of
//	  blame, diff, log, shortlog, show      no --ext-diff, --output, --textconv
//	  branch                                listing: -a, -r, -v, -vv, --all,
//	                                        --remotes, --verbose, --list,
//	                                        --show-current, -i, --ignore-case,
//	                                        --color, --no-color, --column,
//	                                        --no-column, --omit-empty,
//	                                        --contains, --no-contains, --merged,
//	                                        --no-merged, --points-at, --sort,
//	                                        --format; patterns only after
//	                                        --list
//	  cat-file                              no --textconv, --filters
//	  describe, ls-files, ls-tree,          any arguments
//	  rev-parse, status
//	  grep                                  no -O, --open-files-in-pager,
//	                                        --textconv
//	  remote                                only git remote, git remote -v
//	  tag                                   listing: -l, --list, -n, -i, the
//	                                        filters and formats of branch;
//	                                        patterns only after -l or --list
//
// What a command reads is not judged: any file, including a secret, may be
// read. Nor is what a name resolves to: the judgement assumes that PATH finds
// the system's tools and that the git configuration is not the agent's (a
// repository's .git/config can name programs for git to run).
package readonly

import (
	"path"
	"regexp"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Command reports whether line, a shell command line as a vendor's shell
// tool would run it, only reads: it parses as bash and every command in it is
// on the package's list in an accepted form, with no redirection, expansion
// or construct that could write, run another program or hide what runs (the
// rules are in the package documentation). An empty line, a line of only
// comments and a line that does not parse are not read-only.
func Command(line string) bool {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil || len(f.Stmts) == 0 {
		return false
	}
	for _, s := range f.Stmts {
		if !stmt(s) {
			return false
		}
	}
	return true
}

// Argv is Command for a command given as an argument vector (Codex sends
// ["bash","-lc","ls -la"]): a shell invoked with -c/-lc and one script is
// unwrapped and that script judged; anything else is judged as the simple
// command argv, whose elements are taken literally, as exec would pass
// them. The shell may be bash, sh, zsh or dash, by name or in /bin or
// /usr/bin; any other path to a shell, env, or a shell with other arguments
// is not read-only.
func Argv(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	if shell(argv[0]) {
		return len(argv) == 3 && (argv[1] == "-c" || argv[1] == "-lc") && Command(argv[2])
	}
	args := make([]arg, len(argv)-1)
	for i, v := range argv[1:] {
		args[i] = arg{v: v}
	}
	return simple(argv[0], args)
}

// Commands is the documented list, for docs and `drover` help: each entry a
// command name and, where only some of its forms read (git), the
// subcommands ("git status"); sorted. The forms accepted of each are in the
// package documentation. The slice is new on every call.
func Commands() []string {
	var out []string
	for name := range commands {
		if name != "git" {
			out = append(out, name)
		}
	}
	for sub := range gitCommands {
		out = append(out, "git "+sub)
	}
	slices.Sort(out)
	return out
}

// A checker reports whether a command of the list only reads when given
// args. A nil checker accepts any arguments.
type checker func(args []arg) bool

// commands maps each listed command to its checker; those accepting any
// arguments map to nil.
var commands = anyArgs(map[string]checker{
	"date":   dateArgs,
	"file":   denyOptions("C", "compile"),
	"find":   findArgs,
	"git":    gitArgs,
	"printf": printfArgs,
	"rg":     denyOptions("", "pre", "pre-glob", "hostname-bin"),
	"sed":    sedArgs,
	"sort":   denyOptions("o", "output", "compress-program"),
	"tree":   denyOptions("oR", "output"),
	"uniq":   uniqArgs,
}, `basename cat cmp cut df diff dirname du echo egrep false fgrep grep head
	id jq ls nl pwd readlink realpath stat tail tr true type uname wc which whoami`)

// gitCommands is commands for git's subcommands.
var gitCommands = map[string]checker{
	"blame":     denyOptions("", diffRuns...),
	"branch":    gitBranch.accepts,
	"cat-file":  denyOptions("", "textconv", "filters"),
	"describe":  nil,
	"diff":      denyOptions("", diffRuns...),
	"grep":      denyOptions("O", "open-files-in-pager", "textconv"),
	"log":       denyOptions("", diffRuns...),
	"ls-files":  nil,
	"ls-tree":   nil,
	"remote":    gitRemote,
	"rev-parse": nil,
	"shortlog":  denyOptions("", diffRuns...),
	"show":      denyOptions("", diffRuns...),
	"status":    nil,
	"tag":       gitTag.accepts,
}

func anyArgs(m map[string]checker, names string) map[string]checker {
	for _, name := range strings.Fields(names) {
		m[name] = nil
	}
	return m
}

// diffRuns are the options of git's diff machinery, which blame, diff, log,
// shortlog and show all parse, that run a program or write a file.
var diffRuns = []string{"ext-diff", "output", "textconv"}

// An arg is an argument after quote removal.
type arg struct {
	v string
	// glob: v has an unquoted *, ? or [, so the shell may replace it by
	// any number of file names (none, with nullglob) or keep it as it is.
	glob bool
	// risky: a glob whose matches may start with "-".
	risky bool
}

func shell(p string) bool {
	dir, base := path.Split(p)
	return (dir == "" || dir == "/bin/" || dir == "/usr/bin/") &&
		slices.Contains([]string{"bash", "dash", "sh", "zsh"}, base)
}

func stmt(s *syntax.Stmt) bool {
	if s.Negated || s.Background || s.Coprocess || s.Disown {
		return false
	}
	for _, r := range s.Redirs {
		if !redirect(r) {
			return false
		}
	}
	switch c := s.Cmd.(type) {
	case *syntax.CallExpr:
		return call(c)
	case *syntax.BinaryCmd:
		switch c.Op {
		case syntax.AndStmt, syntax.OrStmt, syntax.Pipe, syntax.PipeAll:
			return stmt(c.X) && stmt(c.Y)
		}
	}
	return false
}

func redirect(r *syntax.Redirect) bool {
	if r.N != nil && !digits(r.N.Value) {
		return false // {var}> assigns a variable
	}
	switch r.Op {
	case syntax.RdrIn, syntax.RdrOut, syntax.AppOut, syntax.RdrClob,
		syntax.RdrAll, syntax.AppAll, syntax.DplOut:
	default:
		return false
	}
	a, ok := word(r.Word)
	if !ok || a.glob {
		return false
	}
	switch r.Op {
	case syntax.RdrIn:
		p := path.Clean(a.v)
		return p == "/dev/null" || !strings.HasPrefix(p, "/dev/")
	case syntax.DplOut:
		return a.v == "1" || a.v == "2" || a.v == "/dev/null"
	default:
		return a.v == "/dev/null"
	}
}

func call(c *syntax.CallExpr) bool {
	if len(c.Assigns) > 0 || len(c.Args) == 0 || len(c.Args[0].Parts) != 1 {
		return false
	}
	name, ok := c.Args[0].Parts[0].(*syntax.Lit)
	if !ok {
		return false
	}
	args := make([]arg, 0, len(c.Args)-1)
	for _, w := range c.Args[1:] {
		a, ok := word(w)
		if !ok {
			return false
		}
		args = append(args, a)
	}
	return simple(name.Value, args)
}

// word returns w after quote removal, or false if the shell would expand it
// into something not visible in the command line.
func word(w *syntax.Word) (arg, bool) {
	var b strings.Builder
	var a arg
	leadingMeta := false
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			v := p.Value
			for i := 0; i < len(v); i++ {
				c := v[i]
				switch {
				case c == '\\':
					if i+1 == len(v) {
						return arg{}, false
					}
					i++
					c = v[i]
				case c == '{':
					return arg{}, false
				case c == '*' || c == '?' || c == '[':
					leadingMeta = leadingMeta || b.Len() == 0
					a.glob = true
				}
				b.WriteByte(c)
			}
		case *syntax.SglQuoted:
			if p.Dollar {
				return arg{}, false
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return arg{}, false
			}
			for _, q := range p.Parts {
				lit, ok := q.(*syntax.Lit)
				if !ok {
					return arg{}, false
				}
				unquoteDouble(&b, lit.Value)
			}
		default:
			return arg{}, false
		}
	}
	a.v = b.String()
	a.risky = a.glob && (leadingMeta || strings.HasPrefix(a.v, "-"))
	return a, true
}

// unquoteDouble writes v, the text of a literal inside double quotes, with
// the backslashes bash removes there removed.
func unquoteDouble(b *strings.Builder, v string) {
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) && strings.IndexByte("$`\"\\\n", v[i+1]) >= 0 {
			i++
			if v[i] == '\n' {
				continue
			}
		}
		b.WriteByte(v[i])
	}
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func simple(name string, args []arg) bool {
	check, ok := commands[name]
	if !ok {
		return false
	}
	if check == nil {
		return true
	}
	for _, a := range args {
		if a.risky {
			return false
		}
	}
	return check(args)
}

func denyOptions(short string, long ...string) checker {
	return func(args []arg) bool { return !hasOption(args, short, long) }
}

// hasOption reports whether any of args may be read as one of the short
// options in short, alone or bundled (-uo), or one of the long options, in
// full, abbreviated (--out) or with a value (--output=f). Every argument
// counts, wherever it is, since GNU tools take options after operands; an
// argument that is only another option's value is judged as an option too,
// which refuses more than it must, never less.
func hasOption(args []arg, short string, long []string) bool {
	for _, a := range args {
		if name, ok := strings.CutPrefix(a.v, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			if name != "" && slices.ContainsFunc(long, func(l string) bool { return strings.HasPrefix(l, name) }) {
				return true
			}
			continue
		}
		if len(a.v) > 1 && a.v[0] == '-' && strings.ContainsAny(a.v[1:], short) {
			return true
		}
	}
	return false
}

func printfArgs(args []arg) bool {
	return !slices.ContainsFunc(args, func(a arg) bool { return strings.HasPrefix(a.v, "-v") })
}

func findArgs(args []arg) bool {
	for _, a := range args {
		for _, p := range []string{"-exec", "-ok", "-delete", "-fprint", "-fls"} {
			if strings.HasPrefix(a.v, p) {
				return false
			}
		}
	}
	return true
}

var sedScript = regexp.MustCompile(`^[0-9,$p]+$`)

func sedArgs(args []arg) bool {
	if len(args) < 2 || args[0].v != "-n" || !sedScript.MatchString(args[1].v) {
		return false
	}
	return !slices.ContainsFunc(args[2:], func(a arg) bool { return strings.HasPrefix(a.v, "-") })
}

// dateArgs accepts GNU date without -s/--set and with operands that are
// formats (+…): an operand of another form sets the clock.
func dateArgs(args []arg) bool {
	options := true
	for i := 0; i < len(args); i++ {
		v := args[i].v
		switch {
		case args[i].glob:
			return false
		case options && v == "--":
			options = false
		case options && strings.HasPrefix(v, "--"):
			name, _, attached := strings.Cut(v[2:], "=")
			if strings.HasPrefix("set", name) {
				return false
			}
			if !attached && slices.Contains([]string{"date", "file", "reference"}, name) {
				i++
			}
		case options && len(v) > 1 && v[0] == '-':
			for j := 1; j < len(v); j++ {
				switch v[j] {
				case 's':
					return false
				case 'd', 'f', 'r':
					if j == len(v)-1 {
						i++
					}
					j = len(v)
				case 'I':
					j = len(v)
				}
			}
		case !strings.HasPrefix(v, "+"):
			return false
		}
	}
	return true
}

// uniqArgs accepts uniq with at most one operand, the input: a second one is
// the output file. Once an operand is seen every later argument counts as
// one too, as it does under POSIXLY_CORRECT.
func uniqArgs(args []arg) bool {
	operands := 0
	for i := 0; i < len(args); i++ {
		v := args[i].v
		switch {
		case args[i].glob:
			return false
		case operands > 0 || v == "-" || !strings.HasPrefix(v, "-"):
			operands++
		case v == "--":
			operands += len(args) - i - 1
			i = len(args)
		case slices.Contains([]string{"-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars"}, v):
			i++
		}
	}
	return operands <= 1
}

// gitArgs accepts git with the global options that neither run a program nor
// redirect git to another configuration, and a subcommand of gitCommands.
func gitArgs(args []arg) bool {
	for len(args) > 0 {
		a := args[0]
		switch {
		case a.glob:
			return false
		case a.v == "--no-pager" || a.v == "-P" || a.v == "--no-optional-locks":
			args = args[1:]
		case a.v == "-C":
			if len(args) < 2 || args[1].glob || strings.HasPrefix(args[1].v, "-") {
				return false
			}
			args = args[2:]
		default:
			check, ok := gitCommands[a.v]
			return ok && (check == nil || check(args[1:]))
		}
	}
	return false
}

func gitRemote(args []arg) bool {
	return len(args) == 0 || len(args) == 1 && (args[0].v == "-v" || args[0].v == "--verbose")
}

// A listing describes the list mode of git branch and git tag, whose other
// modes create, delete, rename or copy.
type listing struct {
	flags  []string // options taking no value
	bundle string   // short options that may be bundled, as in -avv
	valued []string // options taking a value, attached with = or else always the next argument
	list   []string // options that make operands patterns to list
}

var filters = []string{"--contains", "--no-contains", "--merged", "--no-merged", "--points-at", "--sort", "--format"}

var gitBranch = listing{
	flags: []string{"--all", "--remotes", "--verbose", "--show-current", "-i", "--ignore-case",
		"--color", "--no-color", "--column", "--no-column", "--omit-empty"},
	bundle: "arv",
	valued: filters,
	list:   []string{"--list"},
}

var gitTag = listing{
	flags:  []string{"-n", "-i", "--ignore-case", "--color", "--column", "--no-column", "--omit-empty"},
	valued: filters,
	list:   []string{"-l", "--list"},
}

func (l listing) accepts(args []arg) bool {
	listed, operands := false, false
	for i := 0; i < len(args); i++ {
		v := args[i].v
		switch {
		case args[i].glob:
			return false
		case slices.Contains(l.list, v):
			listed = true
		case slices.Contains(l.flags, v) || bundled(v, l.bundle):
		case !strings.HasPrefix(v, "-"):
			operands = true
		default:
			name, _, attached := strings.Cut(v, "=")
			if !slices.Contains(l.valued, name) {
				return false
			}
			if !attached && i+1 < len(args) {
				if next := args[i+1]; next.glob || strings.HasPrefix(next.v, "-") {
					return false
				}
				i++
			}
		}
	}
	return listed || !operands
}

func bundled(v, letters string) bool {
	return letters != "" && len(v) > 1 && v[0] == '-' && strings.Trim(v[1:], letters) == ""
}
