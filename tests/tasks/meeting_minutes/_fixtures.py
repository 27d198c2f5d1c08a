"""A small hand-written meeting shared by the meeting-minutes tests."""

from evotrainer.tasks.meeting_minutes.task import ActionItem, MeetingTask

TRANSCRIPT = """Ottilie: Thanks for joining. First, the greenhouse heating budget.
Baptiste: The boiler quote came in at twelve thousand, which is over what we planned.
Ottilie: Could we phase it over two years?
Baptiste: I think so. Let's phase the boiler replacement over two years.
Ottilie: Agreed. Baptiste, can you ask the supplier for a revised quote by Friday?
Baptiste: Sure.
Ottilie: Next, the volunteer seed swap in April.
Rosalind: We have twenty volunteers signed up, but nobody has booked the community hall.
Ottilie: I'll book the community hall.
Rosalind: And I will print the seed swap posters by Monday.
Ottilie: Great. Did anyone see the frost last night? Brutal.
Rosalind: Yes, I lost my tomatoes.
Ottilie: OK, we'll hold the seed swap on the second Saturday of April. Thanks everyone."""

TASK = MeetingTask(
    task_id="hand-1",
    transcript=TRANSCRIPT,
    reference_minutes="""## Topics
- Greenhouse heating budget
- Volunteer seed swap

## Decisions
- Phase the boiler replacement over two years
- Hold the seed swap on the second Saturday of April

## Action items
- Baptiste: ask the supplier for a revised quote (Friday)
- Ottilie: book the community hall
- Rosalind: print the seed swap posters (Monday)""",
    topics=("Greenhouse heating budget", "Volunteer seed swap"),
    decisions=("Phase the boiler replacement over two years", "Hold the seed swap on the second Saturday of April"),
    action_items=(
        ActionItem("Baptiste", "ask the supplier for a revised quote", "Friday"),
        ActionItem("Ottilie", "book the community hall"),
        ActionItem("Rosalind", "print the seed swap posters", "Monday"),
    ),
    source="hand",
)

GOOD = """# Minutes

## Topics
- Greenhouse heating budget: the boiler quote (12k) is over plan.
- Volunteer seed swap in April: twenty volunteers signed up.

## Decisions
- The boiler replacement will be phased over two years.
- The seed swap is on the second Saturday of April.

## Action items
- Baptiste: request a revised quote from the supplier (Friday)
- Ottilie: book the community hall
- Rosalind: print posters for the seed swap (by Monday)
"""

BAD = "The team had a nice chat about the weather and tomatoes. Everyone was happy."
