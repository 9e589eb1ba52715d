package readonly

import (
	"slices"
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// SUP-1: supervised means the same on every vendor, so what runs without
// asking is decided here, from the command line alone.
var commandCases = []struct {
	line string
	want bool
	why  string
}{
	// Accepted.
	{"ls", true, "a listed command"},
	{"ls -la src", true, "ls takes any arguments"},
	{"  ls   # list  ", true, "whitespace and comments"},
	{"git status", true, "git status reads"},
	{"git -C sub log --oneline -5", true, "-C DIR is an accepted global option"},
	{"git --no-pager diff --stat HEAD~1", true, "--no-pager only turns the pager off"},
	{"cat a b | wc -l", true, "a pipeline of listed commands"},
	{"ls |& wc -l", true, "|& pipes stderr too"},
	{"rg -n foo && git diff", true, "&& of listed commands"},
	{"ls; pwd\nwhoami", true, "; and newlines"},
	{"find . -name '*.go'", true, "a quoted pattern is text to find"},
	{"find src -type f -newer go.mod", true, "find without actions"},
	{"sed -n 1,20p f", true, "sed -n with a line-range print script"},
	{"sed -n '$p' f", true, "$ quoted as part of the script"},
	{"ls 2>/dev/null", true, "stderr to /dev/null"},
	{"ls >/dev/null 2>&1", true, "stdout to /dev/null, stderr duplicated"},
	{"ls &>/dev/null", true, "both to /dev/null"},
	{"wc -l < go.mod", true, "reading a file"},
	{"echo hi", true, "echo writes to stdout only"},
	{`echo "a \"b\" c" 'd e'`, true, "quoted arguments are plain text"},
	{"grep -rn 'func main' --include='*.go' .", true, "grep takes any arguments"},
	{"ls *.go", true, "globs are accepted for commands taking any arguments"},
	{"rg foo src/*.go", true, "a glob that cannot match an option"},
	{"git log --oneline -- '*.go'", true, "a pathspec"},
	{"git branch", true, "lists branches"},
	{"git branch -avv", true, "bundled listing flags"},
	{"git branch --contains HEAD~3 --sort=-committerdate", true, "filters take values"},
	{"git branch --list 'feat/*'", true, "patterns after --list"},
	{"git tag", true, "lists tags"},
	{"git tag -l 'v1.*'", true, "patterns after -l"},
	{"git remote -v", true, "lists remotes"},
	{"git rev-parse --show-toplevel", true, "rev-parse reads"},
	{"git diff --no-ext-diff", true, "turning the external diff off"},
	{"sort -u names.txt | uniq -c", true, "sort and uniq to stdout"},
	{"uniq -f 2 in.txt", true, "-f takes a number; one operand"},
	{"date +%Y-%m-%d", true, "a format operand"},
	{"date -d yesterday +%s", true, "-d takes a value"},
	{"printf '%s\\n' a b", true, "printf without -v"},
	{"jq .name package.json", true, "jq reads"},
	{"tree -L 2 src", true, "tree without -o"},
	{"head -n 5 a && tail -f log", true, "tail -f blocks but does not write"},
	{"l\\\ns", true, "a line continuation joins the name as bash does"},
	{"ls 1>&2", true, "stdout to stderr"},
	{"git -C 'a*' status", true, "a quoted * is not a glob"},
	{"git shortlog -sn", true, "shortlog reads"},

	// Joined with a command that is not listed.
	{"ls; rm -rf x", false, "; extends ls with rm"},
	{"ls && touch y", false, "&& extends ls with touch"},
	{"ls || rm x", false, "|| extends ls with rm"},
	{"ls\nrm x", false, "a newline extends ls with rm"},
	{"echo hi | tee f", false, "tee writes a file"},
	{"cat f | sh", false, "a shell reads commands from the pipe"},

	// Expansions that run code or hide a value.
	{"ls $(rm x)", false, "command substitution"},
	{"ls `rm x`", false, "backquoted command substitution"},
	{"ls \"$(rm x)\"", false, "command substitution inside double quotes"},
	{"cat <(rm x)", false, "process substitution"},
	{"echo $((x=1))", false, "arithmetic assigning"},
	{"echo $((1+2))", false, "arithmetic evaluates variables, which can run code"},
	{"echo ${x:=1}", false, "parameter expansion assigning"},
	{"echo $HOME", false, "a parameter's value is not known"},
	{"find . $X", false, "a parameter could expand to -delete"},
	{"$CMD", false, "a parameter as the name"},
	{"ls {a,-delete}", false, "brace expansion"},
	{"find . -{delete,name}", false, "brace expansion making an option"},
	{"ls $'\\x2d'", false, "ANSI-C quoting"},
	{"ls @(a|b)", false, "extended glob"},
	{"ls *(e:'rm x':)", false, "zsh glob qualifier"},
	{"ls =(rm x)", false, "zsh process substitution"},

	// Redirections that write.
	{"ls > out", false, "output to a file"},
	{"ls >> out", false, "appending to a file"},
	{"ls 2> err", false, "stderr to a file"},
	{"ls &> out", false, "both to a file"},
	{"ls >| out", false, "clobbering a file"},
	{"ls >& out", false, ">& to a file"},
	{"cat <> f", false, "<> opens for writing"},
	{"ls {fd}>/dev/null", false, "{var}> assigns a variable"},
	{"> f", false, "a redirection alone truncates f"},
	{"cat < /dev/tcp/example.com/80", false, "bash opens /dev/tcp as a connection"},
	{"cat <<EOF\nx\nEOF", false, "here-document"},
	{"cat <<< x", false, "here-string"},

	// Names and prefixes.
	{"FOO=1 ls", false, "assignment prefix"},
	{"PAGER=sh git log", false, "assignment prefix choosing a program"},
	{"./ls", false, "a path may be the agent's program"},
	{"/bin/ls", false, "a path, even to the real ls"},
	{"l\\s", false, "an escaped name"},
	{`"l"s`, false, "a quoted name"},
	{"l*", false, "a glob as the name"},
	{"less README", false, "interactive, not listed"},
	{"eval ls", false, "eval runs its arguments"},
	{"exec ls", false, "exec"},
	{"env ls", false, "env runs a program"},
	{"xargs rm", false, "xargs runs a program"},
	{"sudo ls", false, "sudo"},
	{"command ls", false, "command"},
	{"builtin echo x", false, "builtin"},
	{"bash -c 'rm x'", false, "a shell is not listed"},
	{"time ls", false, "time is a keyword clause"},
	{"! ls", false, "negation"},

	// Compound commands.
	{"ls &", false, "background"},
	{"(ls)", false, "subshell"},
	{"{ ls; }", false, "block"},
	{"f() { ls; }", false, "function"},
	{"if true; then ls; fi", false, "if"},
	{"for f in a; do cat $f; done", false, "for"},
	{"[[ -f x ]]", false, "test clause"},

	// Listed commands in forms that write or run a program.
	{"git -c core.pager=sh log", false, "git -c sets configuration"},
	{"git --exec-path=/tmp status", false, "--exec-path"},
	{"git --git-dir=/tmp/x status", false, "--git-dir"},
	{"git diff --ext-diff", false, "runs an external diff program"},
	{"git diff --ext", false, "an abbreviation of --ext-diff"},
	{"git log -p --textconv", false, "runs textconv filters"},
	{"git log --output=f", false, "writes f"},
	{"git show --out=f HEAD", false, "abbreviated --output"},
	{"git shortlog --output=f", false, "shortlog parses diff options too"},
	{"git blame --output=f x.go", false, "blame parses diff options too"},
	{"git diff --text", false, "a prefix of --textconv: refused, though it is git's -a"},
	{"git show HEAD@{1}", false, "an unquoted { is refused, brace expansion or not"},
	{"ls >&3", false, "fd 3 may be open on a file"},
	{"git grep -O foo", false, "opens files in a pager"},
	{"git grep -nO foo", false, "-O bundled"},
	{"git branch newbranch", false, "creates a branch"},
	{"git branch -D x", false, "deletes a branch"},
	{"git branch --abbrev 7", false, "--abbrev's value is attached only, so 7 is a branch to create"},
	{"git branch --color always", false, "always is a branch to create"},
	{"git branch -l x", false, "-l created a branch in older git"},
	{"git branch --set-upstream-to=o/m", false, "changes configuration"},
	{"git tag v1", false, "creates a tag"},
	{"git tag -d v1", false, "deletes a tag"},
	{"git remote add o url", false, "adds a remote"},
	{"git commit -m x", false, "not a listed subcommand"},
	{"git", false, "no subcommand"},
	{"git -C a* status", false, "a glob in the global options could become the subcommand"},
	{"find . -delete", false, "deletes"},
	{"find . -exec rm {} \\;", false, "runs rm"},
	{`find . "-delete"`, false, "a quoted -delete is still -delete"},
	{"find . -fprint out", false, "writes out"},
	{"find *", false, "a file named -delete would be an action"},
	{"sed -i s/a/b/ f", false, "edits in place"},
	{"sed -n 'w out' f", false, "the w command writes"},
	{"sed -n 1p -i f", false, "-i after the script"},
	{"sed s/a/b/ f", false, "sed without -n"},
	{"sort -o f x", false, "sort -o writes f"},
	{"sort -uo f x", false, "-o bundled"},
	{"sort --out=f x", false, "abbreviated --output"},
	{"sort --compress-program=sh x", false, "runs a program"},
	{"uniq a b", false, "writes b"},
	{"uniq -c a b", false, "writes b, with an option first"},
	{"uniq a*", false, "a glob can make two operands"},
	{"rg --pre sh x", false, "--pre runs a program on each file"},
	{"rg --pre=sh x", false, "--pre with an attached value"},
	{"rg foo *", false, "a file named --pre=x would be an option"},
	{"printf -v x y", false, "assigns a variable"},
	{"date -s 2020-01-01", false, "sets the clock"},
	{"date --set=2020-01-01", false, "sets the clock"},
	{"date -us 2020-01-01", false, "-s bundled"},
	{"date 010100002020", false, "an operand sets the clock"},
	{"tree -o out", false, "writes out"},
	{"file -C -m magic", false, "compiles a magic file"},

	// Not shell at all.
	{"", false, "empty"},
	{"# just a comment", false, "no command"},
	{"ls '", false, "a parse error"},
	{"ls )", false, "a parse error"},
}

func TestSUP1_Command(t *testing.T) {
	for _, c := range commandCases {
		if got := Command(c.line); got != c.want {
			t.Errorf("Command(%q) = %v, want %v: %s", c.line, got, c.want, c.why)
		}
	}
}

func TestSUP1_Argv(t *testing.T) {
	cases := []struct {
		argv []string
		want bool
		why  string
	}{
		{[]string{"bash", "-lc", "ls -la"}, true, "Codex's shell wrapper is unwrapped"},
		{[]string{"bash", "-lc", "rm x"}, false, "the unwrapped script writes"},
		{[]string{"ls", "-la"}, true, "a simple command"},
		{[]string{"/bin/bash", "-c", "git status"}, true, "the shell may be a system path"},
		{[]string{"/bin/zsh", "-lc", "git log -5"}, true, "zsh, as on macOS"},
		{[]string{"sh", "-c", "ls | wc -l"}, true, "sh"},
		{[]string{"rm", "x"}, false, "not listed"},
		{[]string{"bash", "-lc", "ls", "extra"}, false, "a script with extra arguments"},
		{[]string{"bash", "ls"}, false, "a script file"},
		{[]string{"bash"}, false, "an interactive shell"},
		{[]string{"/usr/bin/env", "bash", "-lc", "ls"}, false, "env runs a program"},
		{[]string{"./bash", "-c", "ls"}, false, "a relative path may be the agent's program"},
		{[]string{"/tmp/bash", "-c", "ls"}, false, "a shell outside /bin and /usr/bin"},
		{[]string{"/bin/ls"}, false, "a path"},
		{[]string{"find", ".", "-delete"}, false, "find deleting"},
		{[]string{"rg", "*"}, true, "no shell, so * is a pattern, not a glob"},
		{[]string{"echo", "$(rm x)"}, true, "no shell, so $(…) is text"},
		{[]string{"git", "branch", "x"}, false, "creates a branch"},
		{nil, false, "empty"},
	}
	for _, c := range cases {
		if got := Argv(c.argv); got != c.want {
			t.Errorf("Argv(%q) = %v, want %v: %s", c.argv, got, c.want, c.why)
		}
	}
}

func TestSUP1_Commands(t *testing.T) {
	got := Commands()
	if !slices.IsSorted(got) {
		t.Errorf("Commands() not sorted: %q", got)
	}
	for _, want := range []string{"ls", "git status", "git branch", "sed"} {
		if !slices.Contains(got, want) {
			t.Errorf("Commands() lacks %q", want)
		}
	}
	for _, name := range got {
		if name == "git" || slices.Contains([]string{"less", "rm", "tee", "xargs", "env"}, name) {
			t.Errorf("Commands() lists %q", name)
		}
		if name != "sed" && !Command(name) {
			t.Errorf("Command(%q) = false for a listed command with no arguments", name)
		}
	}
}

func FuzzCommand(f *testing.F) {
	for _, c := range commandCases {
		f.Add(c.line)
	}
	listed := map[string]bool{}
	for _, name := range Commands() {
		first, _, _ := strings.Cut(name, " ")
		listed[first] = true
	}
	f.Fuzz(func(t *testing.T, line string) {
		if !Command(line) {
			return
		}
		file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
		if err != nil {
			t.Fatalf("Command(%q) = true, but it does not parse: %v", line, err)
		}
		syntax.Walk(file, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.CallExpr:
				if len(n.Assigns) > 0 || !listed[n.Args[0].Lit()] {
					t.Fatalf("Command(%q) = true, with the command %q", line, n.Args[0].Lit())
				}
			case *syntax.Stmt:
				if n.Background || n.Cmd == nil {
					t.Fatalf("Command(%q) = true, with a background or empty statement", line)
				}
			case *syntax.Redirect:
				if n.Hdoc != nil || n.Op == syntax.RdrInOut || n.Op == syntax.WordHdoc {
					t.Fatalf("Command(%q) = true, with the redirection %v", line, n.Op)
				}
			case *syntax.CmdSubst, *syntax.ProcSubst, *syntax.ParamExp, *syntax.ArithmExp,
				*syntax.ExtGlob, *syntax.BraceExp, *syntax.Subshell, *syntax.Block,
				*syntax.FuncDecl, *syntax.IfClause, *syntax.WhileClause, *syntax.ForClause,
				*syntax.CaseClause, *syntax.ArithmCmd, *syntax.TestClause, *syntax.DeclClause,
				*syntax.LetClause, *syntax.TimeClause, *syntax.CoprocClause:
				t.Fatalf("Command(%q) = true, with a %T", line, n)
			}
			return true
		})
	})
}
