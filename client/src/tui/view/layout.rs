//! Where each part goes for a given screen size; shared by drawing and by
//! the state machine (which needs the list's height for paging).

use ratatui::layout::Rect;

/// Height below which an open detail pane takes the whole body.
const SPLIT_MIN_HEIGHT: u16 = 24;

/// The screen cut into parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    /// Tunnel or history summary, two lines (three with a warning).
    pub header: Rect,
    /// The deliveries, when shown.
    pub list: Option<Rect>,
    /// The open delivery, when shown.
    pub detail: Option<Rect>,
    /// Key hints or the last message.
    pub footer: Rect,
}

/// Lines the header and the footer take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chrome {
    /// Two, or three with a warning to show in full.
    pub header_lines: u16,
    /// One, or more for a message that wraps rather than lose its end.
    pub footer_lines: u16,
}

impl Default for Chrome {
    fn default() -> Self {
        Self {
            header_lines: 2,
            footer_lines: 1,
        }
    }
}

/// Lays out `area`; `detail_open` splits the body, `detail_focused` picks the
/// pane that stays when there is no room for both.
pub fn areas(area: Rect, detail_open: bool, detail_focused: bool, chrome: Chrome) -> Areas {
    let header_height = chrome.header_lines.min(area.height);
    let header = Rect {
        height: header_height,
        ..area
    };
    let footer_y = area
        .bottom()
        .saturating_sub(chrome.footer_lines.max(1))
        .max(header.bottom());
    let footer = Rect {
        y: footer_y,
        height: area.bottom() - footer_y,
        ..area
    };
    let body = Rect {
        y: header.bottom(),
        height: footer.y - header.bottom(),
        ..area
    };
    let (list, detail) = match (detail_open, detail_focused) {
        (false, _) => (Some(body), None),
        (true, _) if body.height >= SPLIT_MIN_HEIGHT => {
            let list_height = (body.height * 2 / 5).max(6);
            let list = Rect {
                height: list_height,
                ..body
            };
            let detail = Rect {
                y: list.bottom(),
                height: body.height - list_height,
                ..body
            };
            (Some(list), Some(detail))
        }
        (true, true) => (None, Some(body)),
        (true, false) => (Some(body), None),
    };
    Areas {
        header,
        list,
        detail,
        footer,
    }
}

/// Rows of deliveries that fit in the list (inside its border, under its
/// column titles).
pub fn list_rows(list: Rect) -> usize {
    usize::from(list.height.saturating_sub(3)).max(1)
}

/// Lines of the document that fit in the detail pane.
pub fn detail_rows(detail: Rect) -> usize {
    usize::from(detail.height.saturating_sub(2)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_screens_show_one_pane() {
        let a = areas(Rect::new(0, 0, 60, 15), true, true, Chrome::default());
        assert_eq!(a.header, Rect::new(0, 0, 60, 2));
        assert_eq!(a.list, None);
        assert_eq!(a.detail, Some(Rect::new(0, 2, 60, 12)));
        assert_eq!(a.footer, Rect::new(0, 14, 60, 1));
        let a = areas(Rect::new(0, 0, 120, 40), true, false, Chrome::default());
        assert_eq!(a.list, Some(Rect::new(0, 2, 120, 14)));
        assert_eq!(a.detail, Some(Rect::new(0, 16, 120, 23)));
    }

    #[test]
    fn tiny_screens_do_not_underflow() {
        for h in 0..5 {
            for footer_lines in 1..4 {
                let chrome = Chrome {
                    header_lines: 3,
                    footer_lines,
                };
                let a = areas(Rect::new(0, 0, 10, h), true, true, chrome);
                assert!(a.footer.bottom() <= h.max(a.header.bottom()));
            }
        }
    }
}
