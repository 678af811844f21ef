//! Docs that cannot rot: every parbench command in a shell code block of the README and
//! docs/ must parse as the CLI parses it (`parbench::cli::check_command_line`), and every
//! relative link and image of every Markdown file in the repository must lead to a file, and
//! to a heading where it names one (`#anchor`).
//!
//! The Markdown is read with a CommonMark parser (pulldown-cmark), so a command in a paragraph
//! or a link in a code block is not taken for one; commands are split as a shell would (shlex).

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Something wrong in a Markdown file, at a line of it.
#[derive(Debug, Clone, PartialEq)]
struct Problem {
    line: usize,
    message: String,
}

/// A parbench command found in a code block.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    line: usize,
    /// The line as written (continuations joined, prompt dropped).
    text: String,
    /// What parbench would be given, its name first.
    args: Vec<String>,
}

fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_GFM
}

/// 1-based line numbers of byte offsets.
struct Lines(Vec<usize>);

impl Lines {
    fn of(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines(starts)
    }

    fn line(&self, offset: usize) -> usize {
        self.0.partition_point(|&s| s <= offset)
    }
}

// ---------------------------------------------------------------------------------------------
// Commands

/// The info strings of the code blocks whose lines are shell commands.
const SHELL: &[&str] = &["", "sh", "bash", "console", "shell"];

/// The lines of the shell code blocks of `markdown`, each with its line number in the file;
/// `console` blocks give only their `$ ` lines (the rest is output).
fn shell_lines(markdown: &str) -> Vec<(usize, String)> {
    let lines = Lines::of(markdown);
    let mut out = Vec::new();
    // (is console, lines of the current block)
    let mut block: Option<(bool, Vec<(usize, String)>)> = None;
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let lang = info.split_whitespace().next().unwrap_or("");
                if SHELL.contains(&lang) {
                    block = Some((lang == "console", Vec::new()));
                }
            }
            Event::Text(text) => {
                if let Some((_, block_lines)) = &mut block {
                    let first = lines.line(range.start);
                    for (i, piece) in text.split_inclusive('\n').enumerate() {
                        // A piece that continues an unfinished line (an event may end mid-line).
                        match block_lines.last_mut() {
                            Some((_, last)) if i == 0 && !last.ends_with('\n') => {
                                last.push_str(piece)
                            }
                            _ => block_lines.push((first + i, piece.to_string())),
                        }
                    }
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((console, block_lines)) = block.take() {
                    out.extend(commands_of_block(console, &block_lines));
                }
            }
            _ => {}
        }
    }
    out
}

/// A block's lines with `\` continuations joined and the `$ ` prompt dropped.
fn commands_of_block(console: bool, lines: &[(usize, String)]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut iter = lines.iter();
    while let Some((line, text)) = iter.next() {
        let mut text = text.trim_end_matches('\n').trim_start().to_string();
        let prompted = text.starts_with("$ ") || text == "$";
        if console && !prompted {
            continue;
        }
        if prompted {
            text = text[1..].trim_start().to_string();
        }
        while text.ends_with('\\') {
            text.pop();
            match iter.next() {
                Some((_, next)) => {
                    text.push(' ');
                    text.push_str(next.trim_end_matches('\n').trim());
                }
                None => break,
            }
        }
        out.push((*line, text));
    }
    out
}

/// `line` up to its first shell operator outside quotes: a pipe, a redirection (with its file
/// descriptor: `2>`), `;`, `&`, `&&`, or a `#` comment.
fn cut_at_operators(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut word_start = 0;
    let mut prev: Option<char> = None;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if let Some(q) = quote {
            if c == q {
                quote = None;
            } else if c == '\\' && q == '"' {
                escaped = true;
            }
        } else {
            match c {
                '\\' => escaped = true,
                '\'' | '"' => quote = Some(c),
                '|' | ';' | '&' => return &line[..i],
                '<' | '>' => {
                    // `2>`: the descriptor goes with the redirection.
                    let word = &line[word_start..i];
                    let cut = if !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit()) {
                        word_start
                    } else {
                        i
                    };
                    return &line[..cut];
                }
                '#' if prev.is_none_or(char::is_whitespace) => return &line[..i],
                _ => {}
            }
            if c.is_whitespace() {
                word_start = i + c.len_utf8();
            }
        }
        prev = Some(c);
    }
    line
}

/// Commands that run the command after their own options.
const WRAPPERS: &[&str] = &[
    "mpirun", "mpiexec", "srun", "env", "time", "sudo", "nice", "nohup", "taskset", "numactl",
    "timeout", "perf", "exec", "chrt", "command",
];

fn is_parbench(word: &str) -> bool {
    word == "parbench" || word.ends_with("/parbench")
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// What parbench is given (its name first) when `words` run it: `parbench ARGS`,
/// `target/release/parbench ARGS`, `cargo run [--release] -- ARGS`, any of them after
/// environment assignments or a wrapper such as `mpirun -n 4`. None for any other command.
fn invocation(words: &[String]) -> Option<Vec<String>> {
    let words = &words[words.iter().take_while(|w| is_assignment(w)).count()..];
    let first = words.first()?;
    let parbench = |rest: &[String]| {
        let mut args = vec!["parbench".to_string()];
        args.extend(rest.iter().cloned());
        args
    };
    if is_parbench(first) {
        return Some(parbench(&words[1..]));
    }
    if first == "cargo" && words.get(1).is_some_and(|w| w == "run") {
        let rest = &words[2..];
        let (options, args) = match rest.iter().position(|w| w == "--") {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &rest[rest.len()..]),
        };
        // Another binary or an example is not parbench.
        let other = options
            .windows(2)
            .any(|w| (w[0] == "--bin" || w[0] == "--example") && w[1] != "parbench")
            || options.iter().any(|o| {
                o.starts_with("--example") || (o.starts_with("--bin=") && o != "--bin=parbench")
            });
        return (!other).then(|| parbench(args));
    }
    if WRAPPERS.contains(&first.as_str()) {
        let rest = &words[1..];
        let at = rest.iter().position(|w| is_parbench(w) || w == "cargo")?;
        return invocation(&rest[at..]);
    }
    None
}

/// The parbench commands of `markdown`'s shell code blocks, and the lines that cannot be
/// split as a shell would.
fn find_commands(markdown: &str) -> (Vec<Found>, Vec<Problem>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    for (line, text) in shell_lines(markdown) {
        let command = cut_at_operators(&text).trim();
        if command.is_empty() {
            continue;
        }
        let Some(words) = shlex::split(command) else {
            // Only a problem when it looks like parbench's.
            if command.split_whitespace().any(is_parbench) || command.contains("cargo run") {
                problems.push(Problem {
                    line,
                    message: format!(
                        "`{text}`: cannot split it as a shell would (a quote left open?)"
                    ),
                });
            }
            continue;
        };
        if let Some(args) = invocation(&words) {
            found.push(Found { line, text, args });
        }
    }
    (found, problems)
}

/// `word` as a shell reads it back: quoted only if it must be.
fn quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_alphanumeric() || "_./:=,%+@-".contains(c));
    if plain {
        word.to_string()
    } else {
        shlex::try_quote(word).map_or_else(|_| format!("{word:?}"), |q| q.into_owned())
    }
}

/// The commands of `markdown` and the ones the CLI would refuse.
fn check_commands(markdown: &str) -> (Vec<Found>, Vec<Problem>) {
    let (found, mut problems) = find_commands(markdown);
    for f in &found {
        if let Err(e) = parbench::cli::check_command_line(&f.args) {
            // What parbench is given, as a shell splits it: a placeholder such as
            // `<scenario>` is a redirection to a shell, and cuts the command short.
            let given = f
                .args
                .iter()
                .map(|w| quoted(w))
                .collect::<Vec<_>>()
                .join(" ");
            problems.push(Problem {
                line: f.line,
                message: format!("`{}` (runs `{given}`): {e}", f.text.trim()),
            });
        }
    }
    problems.sort_by_key(|p| p.line);
    (found, problems)
}

// ---------------------------------------------------------------------------------------------
// Links

/// A heading's anchor as GitHub makes it: lowercase; everything but letters, digits, marks,
/// spaces, hyphens and underscores removed; each space a hyphen.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|&c| {
            c.is_alphanumeric()
                || c == ' '
                || c == '-'
                || c == '_'
                // Combining marks (an accent written as a second character).
                || ('\u{300}'..='\u{36f}').contains(&c)
        })
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Unique slugs, as github-slugger gives them: a repeat gets -1, -2, ...
#[derive(Default)]
struct Slugger {
    occurrences: HashMap<String, usize>,
}

impl Slugger {
    fn slug(&mut self, heading: &str) -> String {
        let base = slug(heading);
        let mut slug = base.clone();
        while self.occurrences.contains_key(&slug) {
            let n = self.occurrences.entry(base.clone()).or_default();
            *n += 1;
            slug = format!("{base}-{n}");
        }
        self.occurrences.insert(slug.clone(), 0);
        slug
    }
}

/// A link or image of a Markdown file: its destination and line.
#[derive(Debug)]
struct Link {
    line: usize,
    dest: String,
}

/// What a Markdown file offers and points to: the anchors of its headings (and of HTML
/// `id`/`name` attributes), and its links and images (Markdown, and HTML `href`/`src`).
#[derive(Debug, Default)]
struct Outline {
    anchors: HashSet<String>,
    links: Vec<Link>,
}

/// The values of `attr="..."` (or `'...'`) in a piece of HTML, with their byte offsets.
fn html_attributes<'a>(html: &'a str, attr: &str) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    let lower = html.to_ascii_lowercase();
    let needle = format!("{attr}=");
    let mut from = 0;
    while let Some(at) = lower[from..].find(&needle).map(|i| i + from) {
        from = at + needle.len();
        let boundary = html[..at]
            .chars()
            .next_back()
            .is_some_and(char::is_whitespace);
        let Some(q) = html[from..]
            .chars()
            .next()
            .filter(|c| *c == '"' || *c == '\'')
        else {
            continue;
        };
        if !boundary {
            continue;
        }
        let start = from + 1;
        if let Some(len) = html[start..].find(q) {
            out.push((at, &html[start..start + len]));
        }
    }
    out
}

/// HTML with its comments blanked out (same length, so offsets hold); `in_comment` carries an
/// open comment from one HTML event to the next.
fn without_comments(html: &str, in_comment: &mut bool) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while !rest.is_empty() {
        let marker = if *in_comment { "-->" } else { "<!--" };
        match rest.find(marker) {
            Some(i) => {
                let end = i + marker.len();
                let piece = &rest[..end];
                if *in_comment {
                    out.extend(piece.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
                } else {
                    out.push_str(&rest[..i]);
                    out.push_str(&" ".repeat(marker.len()));
                }
                *in_comment = !*in_comment;
                rest = &rest[end..];
            }
            None => {
                if *in_comment {
                    out.extend(rest.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
                } else {
                    out.push_str(rest);
                }
                rest = "";
            }
        }
    }
    out
}

fn outline(markdown: &str) -> Outline {
    let lines = Lines::of(markdown);
    let mut outline = Outline::default();
    let mut slugger = Slugger::default();
    let mut heading: Option<String> = None;
    let mut in_image = 0usize;
    let mut in_comment = false;
    let mut html = |text: &str, range: Range<usize>, outline: &mut Outline| {
        let text = without_comments(text, &mut in_comment);
        for attr in ["id", "name"] {
            for (_, value) in html_attributes(&text, attr) {
                outline.anchors.insert(value.to_string());
            }
        }
        for attr in ["href", "src"] {
            for (at, value) in html_attributes(&text, attr) {
                outline.links.push(Link {
                    line: lines.line(range.start) + text[..at].matches('\n').count(),
                    dest: value.to_string(),
                });
            }
        }
    };
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::End(TagEnd::Heading(_)) => {
                if let Some(text) = heading.take() {
                    outline.anchors.insert(slugger.slug(&text));
                }
            }
            Event::Start(Tag::Image { dest_url, .. }) => {
                in_image += 1;
                outline.links.push(Link {
                    line: lines.line(range.start),
                    dest: dest_url.to_string(),
                });
            }
            Event::End(TagEnd::Image) => in_image = in_image.saturating_sub(1),
            Event::Start(Tag::Link { dest_url, .. }) => outline.links.push(Link {
                line: lines.line(range.start),
                dest: dest_url.to_string(),
            }),
            Event::Text(t) | Event::Code(t) => {
                if let (Some(h), 0) = (&mut heading, in_image) {
                    h.push_str(&t);
                }
            }
            Event::Html(t) | Event::InlineHtml(t) => html(&t, range, &mut outline),
            _ => {}
        }
    }
    outline
}

/// `%XX` escapes decoded (a link to `a%20b.md` names `a b.md`).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` with `.` and `..` resolved by hand (the file need not exist); None when `..` climbs
/// above the start.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

fn is_external(dest: &str) -> bool {
    let scheme = dest
        .split_once(':')
        .map(|(s, _)| {
            !s.is_empty()
                && s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        })
        .unwrap_or(false);
    scheme || dest.starts_with("//")
}

/// The broken relative links and anchors of `file` (whose text is `markdown`) in the
/// repository at `root`: a target must exist inside the repository, an anchor must be a
/// heading (or HTML id) of the Markdown file it points into.
fn check_links(root: &Path, file: &Path, markdown: &str) -> Vec<Problem> {
    let own = outline(markdown);
    let mut outlines: HashMap<PathBuf, Option<Outline>> = HashMap::new();
    let mut problems = Vec::new();
    let dir = file.parent().unwrap_or(root);
    for link in &own.links {
        let dest = link.dest.trim();
        if dest.is_empty() || is_external(dest) {
            continue;
        }
        let (path, anchor) = match dest.split_once('#') {
            Some((p, a)) => (p, Some(percent_decode(a))),
            None => (dest, None),
        };
        let path = percent_decode(path.split('?').next().unwrap_or(path));
        let problem = |message: String| Problem {
            line: link.line,
            message: format!("link `{dest}`: {message}"),
        };
        let target = if path.is_empty() {
            file.to_path_buf()
        } else {
            // GitHub reads `/x` from the repository's root.
            let joined = match path.strip_prefix('/') {
                Some(from_root) => root.join(from_root),
                None => dir.join(&path),
            };
            match normalize(&joined).filter(|p| p.starts_with(root)) {
                Some(p) if p.exists() => p,
                Some(p) => {
                    problems.push(problem(format!("{} does not exist", shown(root, &p))));
                    continue;
                }
                None => {
                    problems.push(problem("leads out of the repository".into()));
                    continue;
                }
            }
        };
        let Some(anchor) = anchor.filter(|a| !a.is_empty()) else {
            continue;
        };
        // A folder shows its README; an anchor into another kind of file (`x.rs#L10`) is
        // GitHub's line link, not a heading.
        let target = if target.is_dir() {
            target.join("README.md")
        } else {
            target
        };
        if target.extension().is_none_or(|e| e != "md") {
            continue;
        }
        let anchors = if target == file {
            Some(&own)
        } else {
            outlines
                .entry(target.clone())
                .or_insert_with(|| std::fs::read_to_string(&target).ok().map(|t| outline(&t)))
                .as_ref()
        };
        match anchors {
            Some(o) if o.anchors.contains(&anchor) => {}
            Some(_) => problems.push(problem(format!(
                "no heading in {} has the anchor '#{anchor}'",
                shown(root, &target)
            ))),
            None => problems.push(problem(format!("cannot read {}", shown(root, &target)))),
        }
    }
    problems
}

fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// The repository's files

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every Markdown file under `dir`, but for build output and git's own files.
fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != ".git" {
                markdown_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
}

fn all_markdown() -> Vec<PathBuf> {
    let mut files = Vec::new();
    markdown_files(&root(), &mut files);
    files.sort();
    files
}

/// README.md and docs/**/*.md: the files whose commands are checked.
fn documentation() -> Vec<PathBuf> {
    let root = root();
    all_markdown()
        .into_iter()
        .filter(|p| {
            let rel = p.strip_prefix(&root).unwrap_or(p);
            rel == Path::new("README.md") || rel.starts_with("docs")
        })
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn report(all: &[(PathBuf, Problem)]) -> String {
    let root = root();
    all.iter()
        .map(|(file, p)| format!("  {}:{}: {}", shown(&root, file), p.line, p.message))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn documented_commands_parse() {
    let root = root();
    let mut problems = Vec::new();
    let mut in_readme = 0;
    for file in documentation() {
        let (found, broken) = check_commands(&read(&file));
        println!(
            "{}: {} parbench commands, {} refused",
            shown(&root, &file),
            found.len(),
            broken.len()
        );
        for f in &found {
            println!("  {}: {}", f.line, f.text);
        }
        if file == root.join("README.md") {
            in_readme = found.len();
        }
        problems.extend(broken.into_iter().map(|p| (file.clone(), p)));
    }
    assert!(
        in_readme >= 10,
        "only {in_readme} parbench commands found in README.md's code blocks: is the search broken?"
    );
    assert!(
        problems.is_empty(),
        "{} documented command(s) that parbench would refuse:\n{}",
        problems.len(),
        report(&problems)
    );
}

#[test]
fn relative_links_resolve() {
    let root = root();
    let files = all_markdown();
    assert!(files.contains(&root.join("README.md")), "{files:?}");
    let mut problems = Vec::new();
    for file in files {
        let broken = check_links(&root, &file, &read(&file));
        problems.extend(broken.into_iter().map(|p| (file.clone(), p)));
    }
    assert!(
        problems.is_empty(),
        "{} broken link(s):\n{}",
        problems.len(),
        report(&problems)
    );
}

// ---------------------------------------------------------------------------------------------
// The checks themselves, on fixtures

fn commands_in(markdown: &str) -> Vec<(usize, Vec<String>)> {
    let (found, problems) = find_commands(markdown);
    assert!(problems.is_empty(), "{problems:?}");
    found.into_iter().map(|f| (f.line, f.args)).collect()
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn finds_the_commands_a_shell_would_run() {
    let md = "\
# Title

Run `parbench nope` (inline code is not a block).

```sh
cargo build --release
cargo run --release -- all          # the main job
target/release/parbench list | head -3
PARBENCH_ENGINE=naive parbench async --json > report.json 2> err.txt
mpirun --allow-run-as-root -n 4 target/release/parbench data-parallel --backend mpi
parbench sweep matmul \\
    --set size=500:2000:500
# a comment about parbench list
$ parbench devices && parbench list
cp target/release/parbench old/parbench
parbench report 'a b.json'; echo done
```

```rust
parbench::cli::check_command_line([\"parbench\"]);
```

```console
$ parbench help cpu-gpu
parbench 0.1.0: this is output
```

```
./parbench compare a.json b.json
```
";
    assert_eq!(
        commands_in(md),
        vec![
            (7, words("parbench all")),
            (8, words("parbench list")),
            (9, words("parbench async --json")),
            (10, words("parbench data-parallel --backend mpi")),
            (11, words("parbench sweep matmul --set size=500:2000:500")),
            (14, words("parbench devices")),
            (
                16,
                vec!["parbench".into(), "report".into(), "a b.json".into()]
            ),
            (24, words("parbench help cpu-gpu")),
            (29, words("parbench compare a.json b.json")),
        ]
    );
}

#[test]
fn cuts_at_shell_operators_outside_quotes() {
    assert_eq!(cut_at_operators("parbench list | head"), "parbench list ");
    assert_eq!(cut_at_operators("parbench a 2>/dev/null"), "parbench a ");
    assert_eq!(cut_at_operators("parbench a >out"), "parbench a ");
    assert_eq!(
        cut_at_operators("parbench a --x 'p|q' # c"),
        "parbench a --x 'p|q' "
    );
    assert_eq!(cut_at_operators("parbench a --x=b#c"), "parbench a --x=b#c");
    assert_eq!(
        cut_at_operators("parbench a \"x>y\"&& b"),
        "parbench a \"x>y\""
    );
}

#[test]
fn a_command_the_cli_refuses_is_one_problem() {
    let md = "\
Some text.

```sh
parbench async --iterations 10
parbench async --colour red
cargo run --release -- all
```
";
    let (found, problems) = check_commands(md);
    assert_eq!(found.len(), 3);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].line, 5);
    assert!(
        problems[0].message.contains("parbench async --colour red"),
        "{problems:?}"
    );
    assert!(problems[0].message.contains("--colour"), "{problems:?}");

    for broken in [
        "parbench <scenario>",
        "parbench warp",
        "parbench async --shape 1000y1000",
        "parbench sweep matmul --set colour=1",
        "parbench help warp",
        "cargo run --release -- al",
        "parbench 'open",
    ] {
        let (_, problems) = check_commands(&format!("```bash\n{broken}\n```\n"));
        assert_eq!(problems.len(), 1, "{broken}: {problems:?}");
        assert_eq!(problems[0].line, 2, "{broken}");
    }
}

#[test]
fn slugs_as_github_does() {
    assert_eq!(slug("Usage"), "usage");
    assert_eq!(slug("Data-parallel training"), "data-parallel-training");
    assert_eq!(slug("`parbench ab`: two builds"), "parbench-ab-two-builds");
    assert_eq!(slug("What's measured (and why)?"), "whats-measured-and-why");
    assert_eq!(slug("Q&A / FAQ"), "qa--faq");
    assert_eq!(slug("snake_case_name, v1.2"), "snake_case_name-v12");
    assert_eq!(slug("Über café: 1.5× faster"), "über-café-15-faster");
    assert_eq!(slug("🚀 Fast start"), "-fast-start");
    assert_eq!(slug("GPU (CUDA 12/13)"), "gpu-cuda-1213");
    assert_eq!(slug("日本語の見出し"), "日本語の見出し");

    let mut s = Slugger::default();
    assert_eq!(s.slug("Notes"), "notes");
    assert_eq!(s.slug("Notes"), "notes-1");
    assert_eq!(s.slug("Notes"), "notes-2");
    assert_eq!(s.slug("Notes 1"), "notes-1-1");
}

#[test]
fn headings_give_anchors_with_inline_code() {
    let md = "# The `ab` command\n\nText\n\nSetext *heading*\n---\n\n## Usage\n## Usage\n\n<a id=\"custom\"></a>\n";
    let o = outline(md);
    for a in [
        "the-ab-command",
        "setext-heading",
        "usage",
        "usage-1",
        "custom",
    ] {
        assert!(o.anchors.contains(a), "{a}: {:?}", o.anchors);
    }
}

/// A repository with a README and docs/guide.md, for the link checks.
fn fixture_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("docs/img")).expect("mkdir");
    std::fs::write(
        dir.path().join("docs/guide.md"),
        "# Guide\n\n## Running a `sweep`\n\nText.\n",
    )
    .expect("write");
    std::fs::write(dir.path().join("docs/img/a.svg"), "<svg/>").expect("write");
    dir
}

fn link_problems(markdown: &str) -> Vec<Problem> {
    let repo = fixture_repo();
    let root = repo.path().canonicalize().expect("canonical");
    let file = root.join("README.md");
    std::fs::write(&file, markdown).expect("write");
    check_links(&root, &file, markdown)
}

const GOOD_LINKS: &str = "\
# Read me

See [the guide](docs/guide.md), [its sweep section](docs/guide.md#running-a-sweep),
[the top](#read-me), [the docs](docs/), [root-relative](/docs/guide.md),
![a figure](docs/img/a.svg), <img src=\"docs/img/a.svg\" width=\"10\">,
[the web](https://example.com/x#y), [mail](mailto:a@b.c), [spaced](docs/guide.md#guide \"title\").

<!-- [commented out](nowhere.md) <img src=\"nowhere.svg\"> -->

```sh
cat [not a link](nowhere.md)
```

[ref]: docs/guide.md#guide
Also [by reference][ref].
";

#[test]
fn good_links_pass() {
    assert_eq!(link_problems(GOOD_LINKS), Vec::new());
}

#[test]
fn a_missing_file_is_one_problem() {
    let md = format!("{GOOD_LINKS}\nAnd [a lost page](docs/lost.md).\n");
    let problems = link_problems(&md);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].line, md.lines().count());
    assert!(
        problems[0].message.contains("docs/lost.md does not exist"),
        "{problems:?}"
    );

    let problems = link_problems("![gone](docs/img/b.svg)\n");
    assert_eq!(problems.len(), 1, "{problems:?}");
    let problems = link_problems("<img src=\"docs/img/b.svg\">\n");
    assert_eq!(problems.len(), 1, "{problems:?}");
    let problems = link_problems("[out](../../etc/passwd)\n");
    assert_eq!(problems.len(), 1, "{problems:?}");
}

#[test]
fn a_missing_anchor_is_one_problem() {
    let md = format!("{GOOD_LINKS}\nAnd [a lost section](docs/guide.md#running-sweeps).\n");
    let problems = link_problems(&md);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].message.contains("'#running-sweeps'"),
        "{problems:?}"
    );
    let problems = link_problems("# Top\n\n[here](#bottom)\n");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].line, 3);
}
