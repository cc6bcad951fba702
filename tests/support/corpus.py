"""A small made-up corpus (Markdown, plain text and PDF; English and Indonesian) and questions
whose answer is in exactly one document, for testing `rag_search`'s ranking."""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.pdf import pdf_with_text


@dataclass(frozen=True)
class CorpusDocument:
    key: str
    filename: str
    data: bytes


REFUNDS_MD = """# Returns and refunds

Customers of the Kedai Rinjani online store may return an unused item within 30 days of
delivery. Keep the receipt: a return without a receipt gets store credit instead of money.

## How refunds are paid

Refunds go back to the card used for the order within 5 working days after the returned item
reaches our warehouse. Shipping costs are not refunded unless the item arrived damaged.
"""

TRAVEL_MD = """# Travel expense policy

Employees travelling for work book flights in economy class; business class needs the
director's approval in writing before booking.

## Hotels and meals

Hotels up to Rp1.200.000 per night are reimbursed. The daily meal allowance (per diem) is
Rp350.000 per day of travel, paid with the next salary.

## Claims

Submit the expense claim form with every receipt within 14 days of returning.
"""

LEAVE_MD = """# Panduan cuti karyawan

Setiap karyawan tetap mendapat cuti tahunan 12 hari kerja per tahun. Cuti tahunan yang tidak
dipakai boleh dibawa ke tahun berikutnya paling banyak 5 hari.

## Cuti sakit

Karyawan yang sakit lebih dari dua hari wajib menyerahkan surat keterangan dokter. Pengajuan
cuti sakit dikirim melalui atasan langsung lewat aplikasi HR pada hari pertama sakit.
"""

PASSWORD_TXT = """Password reset guide

If you forgot your password, open the sign-in page and choose "Forgot password". We e-mail
you a reset link that works for 30 minutes.

After the reset, two-factor authentication asks for a code from your authenticator app.
Accounts are locked for 15 minutes after five wrong passwords in a row.
"""

TRAIN_TXT = """Jadwal kereta Bandung - Jakarta

Kereta Argo Parahyangan berangkat dari Stasiun Bandung setiap hari pukul 05.00, 09.30, 14.00
dan 19.15, dan tiba di Stasiun Gambir sekitar tiga jam kemudian.

Tiket dapat dibeli di loket stasiun atau aplikasi resmi paling cepat 30 hari sebelum tanggal
keberangkatan.
"""

SERVER_ROOM_LINES = [
    "Server room safety rules",
    "Only staff with a blue badge may enter the server room; visitors sign the log book.",
    "Keep the room between 18 and 24 degrees. Call facilities if the cooling alarm sounds.",
    "In case of fire, press the red gas suppression button, leave the room and close the door.",
    "Never use water on burning equipment. Use the CO2 extinguisher next to the exit.",
]

FRIED_RICE_LINES = [
    "Resep nasi goreng kampung",
    "Bahan: dua piring nasi putih dingin, tiga siung bawang merah, dua siung bawang putih,",
    "lima cabai rawit, satu butir telur, satu sendok makan kecap manis dan garam secukupnya.",
    "Cara membuat: haluskan bawang merah, bawang putih dan cabai, lalu tumis sampai harum.",
    "Masukkan telur, aduk, tambahkan nasi dan kecap manis. Sajikan dengan kerupuk.",
]

CORPUS = [
    CorpusDocument("refunds", "refunds.md", REFUNDS_MD.encode()),
    CorpusDocument("travel", "travel-policy.md", TRAVEL_MD.encode()),
    CorpusDocument("leave", "cuti-karyawan.md", LEAVE_MD.encode()),
    CorpusDocument("password", "password-reset.txt", PASSWORD_TXT.encode()),
    CorpusDocument("train", "jadwal-kereta.txt", TRAIN_TXT.encode()),
    CorpusDocument("server_room", "server-room.pdf", pdf_with_text(SERVER_ROOM_LINES)),
    CorpusDocument("fried_rice", "nasi-goreng.pdf", pdf_with_text(FRIED_RICE_LINES)),
]

# (question, key of the document that answers it)
QUESTIONS = [
    ("How many days do I have to return an item for a refund?", "refunds"),
    ("When is my refund paid back to my card?", "refunds"),
    ("What should I do if there is a fire in the server room?", "server_room"),
    ("Can I book business class flights for work travel?", "travel"),
    ("What is the daily meal allowance when travelling?", "travel"),
    ("I forgot my password, how do I reset it?", "password"),
    ("Berapa hari cuti tahunan yang saya dapat?", "leave"),
    ("Bagaimana cara mengajukan cuti sakit?", "leave"),
    ("Apa saja bahan untuk membuat nasi goreng?", "fried_rice"),
    ("Jam berapa kereta berangkat dari stasiun Bandung?", "train"),
    ("Di mana saya bisa membeli tiket kereta ke Jakarta?", "train"),
]
