"""Phrasing banks for the meeting generator: speaker names and several wordings per speech act.

Slots: ``{topic}`` (a topic title), ``{opt}`` / ``{old}`` (decision verb phrases), ``{task}`` (an
action-item verb phrase), ``{due}`` (a deadline phrase such as " by Friday", possibly empty),
``{name}`` (a speaker's label), ``{meeting}`` (the domain's meeting name), ``{point}`` (a discussion
sentence). Every act has several wordings so the generator never produces a single template.
"""

from __future__ import annotations

__all__ = ["ACCEPT_ASSIGNED", "AGREE", "ANSWER", "CLOSE", "DECIDE", "DECLINE", "DISCUSS", "DISCUSS_GENERIC",
           "DUE_DATES", "EXPLICIT_ACTION", "FILLERS", "FIRST_NAMES", "GENERIC_TASKS", "IMPLICIT_ASK",
           "IMPLICIT_OPEN", "IMPLICIT_TAKE", "INTERRUPT", "INTRO", "OPEN", "OWNER_FIX", "PROPOSE", "QUESTION",
           "RESUME", "REVERSE", "REVERSE_AGREE", "SMALL_TALK", "SMALL_TALK_REPLY", "STANCE", "SURNAMES",
           "DUE_FIX", "VOLUNTEER", "VOLUNTEER_ACK"]

FIRST_NAMES: tuple[str, ...] = (
    "Aiko", "Amara", "Anders", "Ayesha", "Bao", "Bongani", "Caoimhe", "Chidi", "Dagny", "Darius",
    "Dmitri", "Eitan", "Elif", "Emeka", "Esra", "Farid", "Fenna", "Folake", "Giorgos", "Halvard",
    "Hana", "Ilse", "Imani", "Ivo", "Jarrah", "Jiho", "Kaito", "Kalani", "Kasia", "Kemal",
    "Leilani", "Lior", "Liesel", "Mahsa", "Makoa", "Malik", "Marisol", "Mateus", "Mei", "Mirela",
    "Nadia", "Naveen", "Nkechi", "Noor", "Oksana", "Olamide", "Omari", "Orla", "Paavo", "Priya",
    "Quilla", "Radek", "Rania", "Rashid", "Rin", "Saoirse", "Sekou", "Siddharth", "Signe", "Soraya",
    "Sunniva", "Tamar", "Tariq", "Teodora", "Thandiwe", "Tiago", "Tomasz", "Ulla", "Vikram",
    "Wanjiru", "Xiomara", "Yaw", "Yusuf", "Zainab", "Zeynep", "Zoltan", "Ebru", "Kwabena", "Leota",
    "Anahera", "Bartek", "Dilnoza", "Gunnar", "Hyun", "Ingrid", "Joaquin", "Keziah", "Lucan", "Mbali",
)
"""Wide international first-name pool (distinct first names within one meeting)."""

SURNAMES: tuple[str, ...] = (
    "Abara", "Achterberg", "Bhattacharya", "Castellanos", "Dlamini", "Eriksen", "Fujimoto",
    "Gallagher", "Haddad", "Ibarra", "Jovanovic", "Kaur", "Lindqvist", "Mwangi", "Nakamura",
    "Okafor", "Petrov", "Quispe", "Rahimi", "Sandoval", "Takahashi", "Urquhart", "Varga", "Wojcik",
    "Xu", "Yilmaz", "Zulu", "Amundsen", "Boateng", "Chaudhry", "Delacroix", "Esposito", "Ferreira",
    "Grigoryan", "Holmberg", "Iwu", "Jensen", "Kovalenko", "Laine", "Mensah", "Novak", "Oyelaran",
)

DUE_DATES: tuple[str, ...] = (
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "next Monday", "next Wednesday",
    "the end of the week", "the end of the month", "the next meeting", "the 15th", "the 28th",
)

FILLERS: tuple[str, ...] = ("Um,", "Uh,", "So,", "Yeah, so", "I mean,", "Well,", "Okay, so", "Right,")

OPEN: tuple[str, ...] = (
    "OK, let's get started with {meeting}.",
    "Right, thanks everyone for coming to {meeting}.",
    "Morning all. Shall we begin {meeting}?",
    "Let's kick off {meeting}, we have a full agenda.",
    "Alright, I think everyone's here. Welcome to {meeting}.",
)

INTRO: tuple[str, ...] = (
    "First up: {topic}.",
    "Let's talk about {topic}.",
    "Next item is {topic}.",
    "Moving on to {topic}.",
    "OK, {topic}. Where are we on that?",
    "Can we turn to {topic} now?",
    "So, {topic}. {name}, do you want to start?",
    "The next thing on the agenda is {topic}.",
)

DISCUSS: tuple[str, ...] = (
    "Just to add some context on {topic}: {point_lc}",
    "{point} That's the main thing to know about {topic}.",
    "From my side, {point_lc}",
    "And the other thing is, {point_lc}",
    "Worth saying that {point_lc}",
    "{point}",
)
"""Statements that carry one of the topic's discussion points."""

DISCUSS_GENERIC: tuple[str, ...] = (
    "I think we're mostly on track with {topic}, but it's tight.",
    "my main worry with {topic} is the timeline.",
    "I'd want to see the numbers on {topic} before we commit to anything.",
    "we talked about {topic} last time too, and not much has changed.",
    "{topic} has been taking more time than we expected.",
    "I spoke to a couple of people about {topic} and they're broadly supportive.",
    "I'm not sure everyone has the full picture on {topic} yet.",
    "if we get {topic} wrong it'll come back to bite us next quarter.",
    "there are more moving parts in {topic} than it looks.",
    "nobody has really owned {topic} so far, and it shows.",
    "{topic} keeps slipping because it's never anyone's top priority.",
    "the feedback I've heard on {topic} is mixed.",
    "I'd keep {topic} simple rather than perfect.",
    "we should be careful not to overpromise on {topic}.",
    "the budget side of {topic} still worries me a bit.",
    "I'd like us to come out of today with a clear plan on {topic}.",
    "I don't think {topic} is as urgent as people say.",
    "most of the work on {topic} is already done.",
)
"""Topic-generic statement bodies; the generator prefixes one of :data:`STANCE` to most of them."""

STANCE: tuple[str, ...] = (
    "Honestly,", "From what I've seen,", "To be fair,", "If I'm honest,", "The way I see it,", "For what it's worth,",
    "Personally,", "Look,", "I guess", "In my view,", "Thinking about it more,", "Just to be clear,",
)

ANSWER: tuple[str, ...] = (
    "Still in progress, I should know more next week.",
    "No real change since last time, to be honest.",
    "Moving, but slower than I'd like.",
    "Better than last week, actually.",
)

QUESTION: tuple[str, ...] = (
    "What's the latest on {topic}, {name}?",
    "{name}, can you give us an update on {topic}?",
    "Do we know where we stand on {topic}?",
    "Anything new on {topic} since last time?",
)

AGREE: tuple[str, ...] = (
    "Agreed.", "Makes sense to me.", "Yeah, I'm fine with that.", "Sounds good.", "No objection from me.",
    "That works.", "Fair enough.", "Yes, let's do that.", "Good, I support that.",
)

PROPOSE: tuple[str, ...] = (
    "I propose we {opt}.",
    "What if we {opt}?",
    "I think we should {opt}.",
    "Can we just {opt}?",
    "My suggestion is that we {opt}.",
    "Honestly the simplest thing is to {opt}.",
)

DECIDE: tuple[str, ...] = (
    "OK, so we're agreed: we'll {opt}.",
    "Decision, then: we {opt}.",
    "Fine, let's {opt}. That's decided.",
    "Right, that's settled, we {opt}.",
    "Good. So the decision is to {opt}.",
)

REVERSE: tuple[str, ...] = (
    "Actually, going back to {topic}: I don't think we can {old} after all. Let's {opt} instead.",
    "Sorry, one more thing on {topic}. I've changed my mind, we shouldn't {old}. I'd rather we {opt}.",
    "Can I reopen {topic}? Having thought about it, let's not {old}. We should {opt}.",
)

REVERSE_AGREE: tuple[str, ...] = (
    "Yes, that's safer. So we {opt}.",
    "OK, agreed, we {opt} then, not the earlier plan.",
    "Fine by me. Final answer: we {opt}.",
)

EXPLICIT_ACTION: tuple[str, ...] = (
    "Action item: {name} will {task}{due}.",
    "So {name} is going to {task}{due}.",
    "Let's note that {name} will {task}{due}.",
    "{name} to {task}{due}.",
    "Then {name} will {task}{due}, OK?",
)

ACCEPT_ASSIGNED: tuple[str, ...] = (
    "Yes, that's fine.", "Sure.", "Will do.", "OK, no problem.", "Yep, got it.",
)

OWNER_FIX: tuple[str, ...] = (
    "Sorry, I meant {name}, not {old}.",
    "Wait, no, {name} is taking that, not {old}. My mistake.",
)

DUE_FIX: tuple[str, ...] = (
    "Sorry, I meant {due}, not {old}.",
    "Correction, that should be {due}, not {old}.",
)

IMPLICIT_OPEN: tuple[str, ...] = (
    "Someone needs to {task}{due}.",
    "We still need someone to {task}{due}.",
    "Who can {task}{due}?",
    "And somebody has to {task}{due}.",
)

IMPLICIT_TAKE: tuple[str, ...] = (
    "I'll take that.", "I can do it.", "Leave that with me.", "I'll handle it.", "Put me down for that.",
)

IMPLICIT_ASK: tuple[str, ...] = (
    "We also have to {task}{due}. Can you handle it, {name}?",
    "There's still the job to {task}{due}. {name}, could you take it?",
    "{name}, would you be able to {task}{due}?",
)

DECLINE: tuple[str, ...] = (
    "I'm swamped this week, sorry.",
    "I can't, I'm away until Wednesday.",
    "Not me, I'm afraid, I'm already on two other things.",
)

VOLUNTEER: tuple[str, ...] = (
    "I can {task}{due}, if that helps.",
    "I'll {task}{due}.",
    "Let me {task}{due}.",
)

VOLUNTEER_ACK: tuple[str, ...] = ("Great, thanks.", "Perfect, thank you.", "Brilliant.", "Thanks, that helps.")

INTERRUPT: tuple[str, ...] = (
    "Sorry to jump in, but {point_lc}",
    "Can I just add something? {point}",
    "Sorry, quick interruption: {point_lc}",
)

RESUME: tuple[str, ...] = (
    "No worries. As I was saying, {rest}",
    "Sure. Anyway, {rest}",
    "Right. So, {rest}",
)

CLOSE: tuple[str, ...] = (
    "OK, I think that's everything. Thanks, all.",
    "Great, let's wrap up there.",
    "That's time. Thanks, everyone.",
    "Good meeting, see you all next week.",
)

SMALL_TALK: tuple[str, ...] = (
    "Did anyone do anything fun at the weekend?",
    "Is it just me or is it really cold in here?",
    "Sorry, my connection keeps dropping.",
    "Can everyone hear me OK?",
    "Has anyone tried the new bakery on the corner?",
    "I'm still recovering from that storm last night.",
    "Quick question before I forget, is the lift working again?",
    "Oh, I meant to say, lovely photos from the trip.",
    "Sorry I'm late, the train was cancelled again.",
    "Does anyone know if the building is open on the holiday?",
    "My neighbour's dog kept me up all night.",
    "Who finished the milk in the kitchen?",
    "Are we still on for drinks on Thursday?",
    "I've just realised I left my charger at home.",
    "Did you all see the email about the fire drill?",
    "Hang on, someone's at the door.",
    "Has anyone been to that new exhibition in town?",
    "My kids have been off sick all week, it's been chaos.",
)

SMALL_TALK_REPLY: tuple[str, ...] = (
    "Ha, yes.", "Not really, no.", "Same here.", "Yes, loud and clear.", "Tell me about it.",
    "I heard it's good.", "Ha, I know.", "Let's talk after the meeting.", "Oh no.", "Not yet, is it any good?",
    "Yes, I saw that.", "No idea, sorry.",
)

GENERIC_TASKS: tuple[str, ...] = (
    "send round a short summary on {topic}",
    "set up a follow-up meeting about {topic}",
    "collect feedback on {topic} from the wider team",
    "update the shared tracker for {topic}",
    "check the budget impact of {topic}",
    "write up the open questions on {topic}",
)
"""Fallback tasks when a topic's own tasks run out (many action items, few topics)."""
