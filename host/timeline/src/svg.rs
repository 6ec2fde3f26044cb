//! The SVG writer: shapes and text appended in paint order, every text escaped,
//! and groups that carry a `<title>` (a browser's tooltip) around what they hold.
//!
//! The document is written once, as it is drawn: a group opens before its
//! shapes and closes after them, so nothing is parsed back.

use std::fmt::{self, Display, Write as _};

/// An sRGB colour, written `#rrggbb`.
#[derive(Clone, Copy)]
pub(crate) struct Colour(pub u8, pub u8, pub u8);

impl Display for Colour {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }
}

/// Which point of a text its position names, across.
#[derive(Clone, Copy)]
pub(crate) enum Anchor {
    Start,
    Middle,
    End,
}

/// Which point of a text its position names, down.
#[derive(Clone, Copy)]
pub(crate) enum Baseline {
    Top,
    Middle,
    /// The text's own baseline.
    Alphabetic,
}

/// How a text looks and where it sits around its position.
#[derive(Clone, Copy)]
pub(crate) struct Font {
    pub px: f64,
    pub colour: Colour,
    pub anchor: Anchor,
    pub baseline: Baseline,
}

/// An SVG document being written; `finish` closes it.
pub(crate) struct Svg {
    out: String,
}

impl Svg {
    /// A `width` × `height` document whose texts are sans-serif, titled `title`.
    pub fn new(width: i32, height: i32, title: &str) -> Svg {
        let mut svg = Svg { out: String::new() };
        svg.emit(format_args!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
             viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\">\n<title>{}</title>\n",
            Escaped(title)
        ));
        svg
    }

    /// A filled rectangle between two corners.
    pub fn rect(&mut self, (x0, y0): (i32, i32), (x1, y1): (i32, i32), fill: Colour) {
        let (x, y, w, h) = (x0.min(x1), y0.min(y1), (x1 - x0).abs(), (y1 - y0).abs());
        self.emit(format_args!(
            "<rect x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" fill=\"{fill}\"/>\n"
        ));
    }

    /// A filled polygon through `points`.
    pub fn polygon(&mut self, points: &[(i32, i32)], fill: Colour) {
        self.out.push_str("<polygon points=\"");
        for (i, (x, y)) in points.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            self.emit(format_args!("{sep}{x},{y}"));
        }
        self.emit(format_args!("\" fill=\"{fill}\"/>\n"));
    }

    /// A straight line.
    pub fn line(&mut self, from: (i32, i32), to: (i32, i32), stroke: Colour, width: u32) {
        self.line_with(from, to, stroke, width, "");
    }

    /// A straight line drawn as `dash` pixels on, `gap` off.
    pub fn dashed_line(
        &mut self,
        from: (i32, i32),
        to: (i32, i32),
        stroke: Colour,
        width: u32,
        (dash, gap): (u32, u32),
    ) {
        self.line_with(from, to, stroke, width, &format!(" stroke-dasharray=\"{dash} {gap}\""));
    }

    fn line_with(
        &mut self,
        (x1, y1): (i32, i32),
        (x2, y2): (i32, i32),
        stroke: Colour,
        width: u32,
        extra: &str,
    ) {
        self.emit(format_args!(
            "<line x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\" stroke=\"{stroke}\" stroke-width=\"{width}\"{extra}/>\n"
        ));
    }

    /// An unfilled circle.
    pub fn ring(&mut self, (cx, cy): (i32, i32), r: i32, stroke: Colour, width: u32) {
        self.emit(format_args!(
            "<circle cx=\"{cx}\" cy=\"{cy}\" r=\"{r}\" fill=\"none\" stroke=\"{stroke}\" stroke-width=\"{width}\"/>\n"
        ));
    }

    /// One line of text at `(x, y)`.
    pub fn text(&mut self, text: &str, (x, y): (i32, i32), font: Font) {
        let anchor = match font.anchor {
            Anchor::Start => "",
            Anchor::Middle => " text-anchor=\"middle\"",
            Anchor::End => " text-anchor=\"end\"",
        };
        // `dy` rather than `dominant-baseline`: every SVG reader honours it.
        let shift = match font.baseline {
            Baseline::Top => " dy=\"0.76em\"",
            Baseline::Middle => " dy=\"0.35em\"",
            Baseline::Alphabetic => "",
        };
        let (px, colour) = (font.px, font.colour);
        self.emit(format_args!(
            "<text x=\"{x}\" y=\"{y}\"{shift}{anchor} font-size=\"{px}\" fill=\"{colour}\">{}</text>\n",
            Escaped(text)
        ));
    }

    /// What `draw` draws, as one `<g class=…>` whose first child is a
    /// `<title>` holding `title`.
    pub fn group(&mut self, class: &str, title: &str, draw: impl FnOnce(&mut Svg)) {
        self.emit(format_args!(
            "<g class=\"{}\"><title>{}</title>\n",
            Escaped(class),
            Escaped(title)
        ));
        draw(self);
        self.out.push_str("</g>\n");
    }

    /// The whole document.
    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }

    fn emit(&mut self, args: fmt::Arguments<'_>) {
        // Writing to a String cannot fail.
        let _ = self.out.write_fmt(args);
    }
}

/// `text` as XML character data or an attribute value: markup characters
/// as entities, and each character XML 1.0 cannot hold at all (control
/// characters but tab and line breaks, U+FFFE, U+FFFF) as U+FFFD.
pub(crate) struct Escaped<'a>(pub &'a str);

impl Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Byte by byte: all that is replaced is ASCII or starts with 0xEF,
        // so every cut falls between two characters.
        let bytes = self.0.as_bytes();
        let (mut done, mut at) = (0, 0);
        while at < bytes.len() {
            let replacement = match bytes[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                b'\'' => "&apos;",
                b'\t' | b'\n' | b'\r' => {
                    at += 1;
                    continue;
                }
                0..=0x1f => "\u{FFFD}",
                // U+FFFE and U+FFFF.
                0xef if bytes.get(at + 1) == Some(&0xbf)
                    && matches!(bytes.get(at + 2), Some(0xbe | 0xbf)) =>
                {
                    "\u{FFFD}"
                }
                _ => {
                    at += 1;
                    continue;
                }
            };
            f.write_str(&self.0[done..at])?;
            f.write_str(replacement)?;
            at += if bytes[at] == 0xef { 3 } else { 1 };
            done = at;
        }
        f.write_str(&self.0[done..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_characters_xml_cannot_hold_are_escaped() {
        let hostile = "a<b>&c\"d'e]]>\u{0}\u{1b}[31m\u{FFFF}\ttab\nline é✓";
        assert_eq!(
            Escaped(hostile).to_string(),
            "a&lt;b&gt;&amp;c&quot;d&apos;e]]&gt;\u{FFFD}\u{FFFD}[31m\u{FFFD}\ttab\nline é✓"
        );
        assert_eq!(Escaped("plain").to_string(), "plain");
    }

    #[test]
    fn a_group_holds_its_title_then_its_shapes() {
        let mut svg = Svg::new(10, 10, "t<");
        svg.group("check pass", "it <passed> & \u{7}", |svg| {
            svg.rect((1, 1), (3, 4), Colour(0, 0x80, 0xff))
        });
        let text = svg.finish();
        let doc = roxmltree::Document::parse(&text).unwrap();
        let root = doc.root_element();
        assert_eq!(root.tag_name().namespace(), Some("http://www.w3.org/2000/svg"));
        let g = root.children().find(|n| n.has_tag_name("g")).unwrap();
        assert_eq!(g.attribute("class"), Some("check pass"));
        let children: Vec<&str> =
            g.children().filter(|n| n.is_element()).map(|n| n.tag_name().name()).collect();
        assert_eq!(children, ["title", "rect"]);
        assert_eq!(g.first_element_child().unwrap().text(), Some("it <passed> & \u{FFFD}"));
        let rect = g.children().find(|n| n.has_tag_name("rect")).unwrap();
        assert_eq!((rect.attribute("width"), rect.attribute("fill")), (Some("2"), Some("#0080ff")));
    }
}
