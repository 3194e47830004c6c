"""The papers nemo is built from, named as a reader knows them: by their
authors and titles.  The report names a paper in full in a section's
heading and by its authors after that."""

NEMO = "Hale & Dinda"
NEMO_TITLE = "An Evaluation of Asynchronous Software Events on Modern Hardware"
POLLING = "Perkovic & Keleher"
POLLING_TITLE = "Responsiveness without Interrupts"
MULTICAST = "Kuban, Rotta & Nolte"
MULTICAST_TITLE = "Help Your Busy Neighbors: Dynamic Multicasts over Static Topologies"
CURRYING = "Minnich, Floren & McKie"
CURRYING_TITLE = ("Using Currying and Process-Private System Calls to Break the One-Microsecond "
                  "System Call Barrier")


def cite(authors, title):
    """'Authors, Title' for plain text (figure captions, advice)."""
    return f"{authors}, {title}"
