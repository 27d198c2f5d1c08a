"""Domain content banks for the meeting generator.

Each :class:`Domain` holds the kind of meeting, at least six :class:`Topic` records and some
domain-flavoured small talk. A topic carries its title (the ground-truth topic phrase, also spoken in
the transcript), discussion points (full sentences), two alternative decisions (bare verb phrases that
read after "we will ..."), and action-item tasks (bare verb phrases that read after "X will ...").

The banks are written by hand for this project. Texts are compact ``" | "``-separated strings that
:func:`_topic` splits, so that one topic fits in a few lines.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DOMAINS", "Domain", "Topic"]


@dataclass(frozen=True)
class Topic:
    """One agenda item of a domain.

    Attributes:
        title: short noun phrase; the ground-truth topic and what the chair announces.
        points: discussion sentences about the topic (no speaker label).
        options: two alternative decisions, bare verb phrases ("move the launch to May").
        tasks: action-item tasks, bare verb phrases ("draft the launch email").
    """

    title: str
    points: tuple[str, ...]
    options: tuple[str, ...]
    tasks: tuple[str, ...]


@dataclass(frozen=True)
class Domain:
    """A kind of meeting with its agenda pool.

    Attributes:
        name: identifier stored in ``MeetingTask.meta["domain"]``.
        meeting: how the chair names the meeting ("the weekly engineering standup").
        topics: agenda pool, at least six (the ``topics`` knob goes up to 6).
        small_talk: off-topic lines flavoured for the domain.
    """

    name: str
    meeting: str
    topics: tuple[Topic, ...]
    small_talk: tuple[str, ...]


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(" | ") if part.strip())


def _topic(title: str, points: str, options: str, tasks: str) -> Topic:
    return Topic(title, _split(points), _split(options), _split(tasks))


def _domain(name: str, meeting: str, topics: tuple[Topic, ...], small_talk: str) -> Domain:
    return Domain(name, meeting, topics, _split(small_talk))


_ENGINEERING = _domain(
    "engineering_standup",
    "the engineering standup",
    (
        _topic("the mobile release", "QA found two blockers in the checkout screen. | The build pipeline "
               "was red most of Tuesday. | Crash rates on Android went up slightly after the last beta.",
               "ship the mobile release on Thursday | hold the mobile release until the blockers are fixed",
               "write the release notes | rerun the regression suite on the checkout screen | "
               "tell customer support about the new release date"),
        _topic("the flaky integration tests", "About one run in five fails for no clear reason. | Most "
               "failures come from the payment sandbox timing out. | People have started ignoring red builds.",
               "quarantine the flaky tests for two weeks | block merges until the tests are stable",
               "tag every flaky test in the tracker | raise the sandbox timeout | "
               "write a short guide on rerunning failed jobs"),
        _topic("the database migration", "The new schema is ready on staging. | The migration script takes "
               "about forty minutes on a copy of production. | We need a rollback plan before we touch "
               "production.", "run the database migration over the weekend | split the database migration "
               "into three smaller steps", "write the rollback plan for the migration | book a maintenance "
               "window with operations | test the migration script on last week's snapshot"),
        _topic("the on-call rotation", "Two people have been paged every night this week. | Half the "
               "alerts are noise from the disk monitor. | New starters are not on the rotation yet.",
               "add the new starters to the on-call rotation | move to a weekly on-call rotation",
               "silence the noisy disk alerts | update the on-call schedule | "
               "pair each new starter with an experienced engineer"),
        _topic("the API rate limits", "A partner is hitting the limit during their nightly sync. | Raising "
               "the limit for everyone would cost us more in hosting. | We never documented the current limits.",
               "raise the rate limit for the partner only | keep the current rate limits for everyone",
               "document the current rate limits | email the partner about the limits | "
               "add a dashboard for rate-limit rejections"),
        _topic("the code review backlog", "There are thirty open pull requests older than a week. | Reviews "
               "are concentrated on two senior people. | Some pull requests are far too large to review.",
               "cap pull requests at four hundred lines | assign reviewers round robin",
               "close the stale pull requests | set up automatic reviewer assignment | "
               "write the pull request size guideline"),
    ),
    ("Did the coffee machine on our floor ever get fixed? | Sorry, my laptop just decided to update itself. | "
     "Has anyone else's keyboard started double typing?"),
)

_SALES = _domain(
    "sales_pipeline",
    "the weekly pipeline review",
    (
        _topic("the enterprise renewals", "Three large renewals close this quarter. | One customer is asking "
               "for a fifteen percent discount. | Their usage dropped after the reorganisation.",
               "offer a two-year renewal with a small discount | hold the price and add training hours",
               "prepare the renewal proposal | set up a call with the customer's finance team | "
               "pull the usage report for the last six months"),
        _topic("the quarterly forecast", "We are at about seventy percent of target. | Two deals slipped "
               "into next quarter. | The forecast in the CRM does not match the spreadsheet.",
               "lower the quarterly forecast by ten percent | keep the quarterly forecast as it is",
               "reconcile the CRM with the forecast spreadsheet | send the forecast to the finance director | "
               "review every deal over fifty thousand"),
        _topic("the new pricing tiers", "Customers find the middle tier confusing. | Competitors dropped "
               "their entry price last month. | Marketing wants the new pricing live before the trade show.",
               "launch the new pricing tiers next month | test the new pricing tiers with ten customers first",
               "draft the pricing page copy | brief the account managers on pricing | "
               "collect competitor price sheets"),
        _topic("lead quality from the webinar", "The webinar brought in four hundred leads. | Only a handful "
               "have booked a demo. | Many sign-ups used personal email addresses.",
               "hand the webinar leads to the inside sales team | run a nurture email sequence first",
               "score the webinar leads | write the nurture emails | remove duplicate contacts from the list"),
        _topic("the partner channel", "The reseller in the north region closed two deals. | Partners want "
               "a bigger margin. | Our partner portal is out of date.",
               "raise the partner margin to twenty percent | keep the partner margin and add co-marketing funds",
               "update the partner portal | draft the new partner agreement | "
               "schedule a review with the northern reseller"),
        _topic("sales territory changes", "Two account managers are leaving next month. | The west "
               "territory is much larger than the others. | Customers dislike changing contacts mid-year.",
               "split the west territory in two | keep the territories until the new year",
               "map the accounts in the west territory | write to affected customers | "
               "update the territory assignments in the CRM"),
    ),
    "Did anyone get stuck in the traffic on the ring road this morning? | I finally hit my step goal "
    "yesterday. | Who keeps taking the good chairs from the demo room?",
)

_SCHOOL = _domain(
    "school_board",
    "the school board meeting",
    (
        _topic("the bus route changes", "Parents on the east side say pickup is too early. | The bus "
               "company is short of drivers. | One route takes almost an hour each way.",
               "move the first pickup fifteen minutes later | merge the two eastern bus routes",
               "survey parents about pickup times | meet the bus company about drivers | "
               "publish the new route map"),
        _topic("the library renovation", "The quote came in higher than the budget. | Work can only "
               "happen during the summer break. | Students want more quiet study space.",
               "approve the library renovation in two phases | postpone the library renovation a year",
               "request a second quote for the renovation | apply for the district facilities grant | "
               "ask the student council for input on the layout"),
        _topic("the teacher hiring plan", "We have four open positions for the autumn. | Science "
               "applicants are very thin. | Neighbouring districts pay a signing bonus.",
               "offer a signing bonus for science teachers | widen the search to part-time teachers",
               "post the vacancies on the regional job board | draft the bonus policy | "
               "contact the university's teacher training office"),
        _topic("the cafeteria contract", "The current contract ends in June. | Families complain about "
               "portion sizes. | A local cooperative has put in a bid.",
               "renew the cafeteria contract for one year | tender the cafeteria contract again",
               "compare the cafeteria bids | invite the cooperative to present | "
               "collect feedback from families on the menu"),
        _topic("the exam calendar", "Two exams clash with a public holiday. | The music festival is the "
               "same week as the maths exam. | Teachers want a revision week.",
               "move the maths exam a week later | keep the exam calendar and shift the festival",
               "circulate the revised exam calendar | notify the exam board | book the sports hall for exams"),
        _topic("the playground safety review", "The inspector flagged the old climbing frame. | Surfacing "
               "under the swings is worn. | The parent association offered to fundraise.",
               "replace the climbing frame this term | close the climbing frame until funds are raised",
               "get quotes for new surfacing | write to the parent association | "
               "put up signs at the climbing frame"),
    ),
    "Congratulations to the debate team, by the way. | Is the heating on in here or is it just me? | "
    "My daughter says the new history teacher is brilliant.",
)

_CLINIC = _domain(
    "clinic_operations",
    "the clinic operations meeting",
    (
        _topic("patient waiting times", "Average waits in the morning are over forty minutes. | Walk-ins "
               "spike on Mondays. | The check-in kiosk is often out of order.",
               "add an extra nurse on Monday mornings | move walk-ins to the afternoon",
               "analyse last month's waiting-time data | fix the check-in kiosk | "
               "redesign the Monday rota"),
        _topic("the vaccine fridge incident", "The fridge alarm went off on Saturday night. | Nobody "
               "received the alert because the phone list was old. | Some doses may need to be discarded.",
               "buy a second vaccine fridge | install remote temperature monitoring",
               "update the alarm phone list | file the incident report | "
               "check which doses must be discarded"),
        _topic("the appointment reminder system", "About one in ten patients do not show up. | Reminders "
               "only go out by letter. | Older patients prefer a phone call.",
               "switch to text message reminders | offer both text and phone reminders",
               "choose a text reminder provider | update consent forms for text messages | "
               "measure the no-show rate for a month"),
        _topic("staff training on the new records system", "Half the staff have done the training. | "
               "Night staff cannot attend the daytime sessions. | The vendor charges per session.",
               "run evening training sessions | make the online training module mandatory",
               "book the evening training sessions | track who has completed training | "
               "ask the vendor for a discount"),
        _topic("medical supply ordering", "We ran out of dressing packs twice last month. | Orders are "
               "placed by whoever notices. | The supplier offers a standing order discount.",
               "set up a standing order with the supplier | name one person responsible for orders",
               "count current supply stock | draft the standing order | set minimum stock levels"),
        _topic("the patient feedback survey", "Response rates are low. | Most complaints are about "
               "parking. | Positive comments mention the reception team.",
               "move the patient survey online | keep paper surveys at reception",
               "summarise the survey comments | talk to the landlord about parking | "
               "share the positive feedback with reception"),
    ),
    "Has anyone tried the new sandwich place across the road? | The car park barrier was stuck again "
    "this morning. | I can't believe it's already dark at five.",
)

_COUNCIL = _domain(
    "city_council",
    "the council committee meeting",
    (
        _topic("the cycle lane proposal", "Shop owners worry about losing parking. | Accident numbers on "
               "the high street went up last year. | The transport grant covers most of the cost.",
               "approve a six-month cycle lane trial | consult residents again before any trial",
               "prepare the consultation leaflet | apply for the transport grant | "
               "count parking use on the high street"),
        _topic("street lighting repairs", "Residents reported forty broken lights. | LED replacements cut "
               "energy bills by half. | The contractor's backlog is three months.",
               "replace all broken lights with LEDs | repair the worst streets first",
               "map the broken street lights | ask the contractor for a schedule | "
               "estimate the energy savings"),
        _topic("the park events permit fees", "Small charities say the fee is too high. | Larger events "
               "leave the park damaged. | Permit income fell last year.",
               "waive permit fees for small charities | introduce a damage deposit for large events",
               "draft the revised fee schedule | write to the charities affected | "
               "review last year's damage repair costs"),
        _topic("the housing allocation report", "The waiting list grew by eight percent. | Several "
               "council flats have been empty for months. | Repairs are the main delay.",
               "fast-track repairs on empty flats | commission an external housing review",
               "list all empty council flats | get repair estimates for empty flats | "
               "present the report to the full council"),
        _topic("recycling collection changes", "Glass contamination is rising. | Collections moved to "
               "fortnightly last spring. | Complaints doubled after the change.",
               "return to weekly recycling collections | add separate glass collection",
               "model the cost of weekly collections | run a recycling awareness campaign | "
               "respond to the complaint backlog"),
        _topic("the market square redesign", "The architect presented three options. | Traders want to "
               "keep the Saturday market. | Heritage rules limit what we can change.",
               "go ahead with the architect's second option | ask the architect for a cheaper option",
               "share the designs with market traders | check the heritage rules with the planning officer | "
               "set up a public exhibition of the designs"),
    ),
    "Did everyone get a parking permit for the new building? | The microphone at the end seems to be "
    "off. | I see the fountain outside is running again.",
)

_RESEARCH = _domain(
    "research_group",
    "the lab meeting",
    (
        _topic("the conference submission", "The deadline is in three weeks. | The ablation results are "
               "still missing. | Reviewers last time asked for a larger baseline.",
               "submit the paper to the conference | wait and submit the paper to the journal",
               "run the missing ablations | rewrite the related work section | "
               "make the figures consistent"),
        _topic("the shared GPU cluster", "Jobs are waiting over a day in the queue. | One user has "
               "reserved eight nodes for a month. | The cluster needs a maintenance day.",
               "introduce a two-day cap on reservations | buy time on a cloud provider",
               "write the cluster usage policy | schedule the maintenance day | "
               "get a quote for cloud compute"),
        _topic("the data collection protocol", "The ethics amendment was approved. | Participants drop "
               "out after the second session. | The consent form is too long.",
               "shorten the study to two sessions | pay participants a completion bonus",
               "revise the consent form | recruit twenty more participants | update the protocol document"),
        _topic("the reading group", "Attendance dropped to three people. | Papers are chosen at the last "
               "minute. | Students want more methods papers.",
               "move the reading group to every other week | let students pick the papers",
               "set up the reading list for next term | send the reading group invite | "
               "find a room for the reading group"),
        _topic("the grant report", "The funder wants an interim report next month. | Two milestones are "
               "behind schedule. | The budget is underspent on travel.",
               "ask the funder for a three-month extension | move the travel money to equipment",
               "draft the interim report | update the milestone table | check the spending with finance"),
        _topic("the lab equipment booking", "The microscope is double-booked most Fridays. | People book "
               "slots and never show up. | The booking sheet is on paper.",
               "move microscope bookings to an online calendar | limit each person to two slots a week",
               "set up the online booking calendar | label the microscope with the booking rules | "
               "train the new students on the microscope"),
    ),
    "Has anyone seen my red notebook? I left it in the seminar room. | The seminar speaker last week was "
    "excellent. | Is the kettle in the kitchen broken again?",
)

_RESTAURANT = _domain(
    "restaurant_ops",
    "the restaurant team meeting",
    (
        _topic("the new spring menu", "The tasting went well except the risotto. | Asparagus prices "
               "doubled this month. | Servers need time to learn the dishes.",
               "launch the spring menu next Monday | launch the spring menu without the risotto",
               "print the new menus | cost out every new dish | run a tasting session for the servers"),
        _topic("the weekend staffing", "Saturday nights are short two servers. | Overtime costs went up "
               "last month. | One cook wants fewer weekend shifts.",
               "hire two part-time servers for weekends | offer a weekend shift bonus",
               "post the part-time job advert | redo the weekend rota | interview the server candidates"),
        _topic("the health inspection", "The inspection is expected within a month. | The walk-in "
               "fridge seal is damaged. | Temperature logs have gaps.",
               "close for a deep clean before the inspection | do the deep clean after hours",
               "replace the fridge door seal | fill in the temperature logs daily | "
               "book the deep-clean company"),
        _topic("the delivery platform fees", "The platform raised its commission to thirty percent. | "
               "Delivery orders make up a quarter of sales. | Packaging costs are rising too.",
               "raise delivery menu prices by ten percent | start our own delivery service",
               "renegotiate the platform commission | price out our own delivery service | "
               "find cheaper packaging"),
        _topic("food waste", "We throw out about twelve kilos of bread a week. | Portion sizes on the "
               "lunch menu are large. | A food bank offered to collect leftovers.",
               "partner with the food bank on leftovers | reduce lunch portion sizes",
               "weigh the food waste every day | call the food bank | adjust the bread order"),
        _topic("the private dining bookings", "Enquiries for the back room doubled. | Large groups cancel "
               "late. | There is no set menu for groups.",
               "require a deposit for private dining | create a fixed group menu",
               "write the private dining terms | design the group menu | "
               "update the booking page for private dining"),
    ),
    "Did anyone see the match last night? | The new dishwasher is so much quieter. | "
    "Who left the radio on in the kitchen overnight?",
)

_NONPROFIT = _domain(
    "nonprofit_fundraising",
    "the fundraising committee meeting",
    (
        _topic("the spring gala", "Ticket sales are at sixty percent. | The venue wants the final "
               "numbers in two weeks. | Two sponsors have not confirmed.",
               "lower the gala ticket price | keep the price and add a raffle",
               "chase the two sponsors | send the gala reminder email | confirm numbers with the venue"),
        _topic("the monthly donor program", "Monthly donors give more over a year. | The sign-up form is "
               "hard to find. | Card expiry causes lapses.",
               "make monthly giving the default on the donate page | run a monthly donor campaign in May",
               "redesign the donate page | email lapsed monthly donors | set up card expiry reminders"),
        _topic("the foundation grant application", "The foundation focuses on youth programs. | The "
               "deadline is the end of the month. | We need audited accounts.",
               "apply for the full two-year grant | apply for a smaller pilot grant",
               "write the grant narrative | get the audited accounts from the treasurer | "
               "collect letters of support"),
        _topic("the volunteer recruitment drive", "We lost ten volunteers over the winter. | Students "
               "are interested but only in summer. | The induction is a full day.",
               "shorten the volunteer induction to half a day | partner with the local college",
               "update the volunteer handbook | contact the college volunteering office | "
               "post the volunteer call on social media"),
        _topic("the donor database cleanup", "There are many duplicate donor records. | Some donors were "
               "thanked twice. | The database export is slow.",
               "hire a contractor to clean the donor database | clean the donor database ourselves",
               "merge the duplicate donor records | write data entry rules | "
               "get a quote from the database contractor"),
        _topic("the annual impact report", "Last year's report came out late. | Donors liked the stories "
               "more than the numbers. | Printing costs are high.",
               "publish the impact report online only | print a short version of the impact report",
               "collect three beneficiary stories | compile the annual figures | find a volunteer designer"),
    ),
    "Thanks for the cake, whoever brought it. | The office plants look much happier since the move. | "
    "Did everyone manage to find parking?",
)

_LOGISTICS = _domain(
    "warehouse_logistics",
    "the warehouse operations meeting",
    (
        _topic("the peak season plan", "Volume is expected to rise forty percent in November. | We need "
               "around fifteen temporary pickers. | The agency needs six weeks' notice.",
               "add a night shift for peak season | extend day shifts by two hours",
               "place the order with the staffing agency | draft the peak season shift plan | "
               "order extra packing material"),
        _topic("forklift safety", "There were two near misses in aisle nine. | Pedestrian walkways are "
               "poorly marked. | Some licences expire next month.",
               "repaint the walkways this weekend | ban forklifts in aisle nine during picking",
               "renew the expiring forklift licences | write up the near-miss reports | "
               "order new floor paint"),
        _topic("the returns backlog", "About two thousand returns are waiting to be processed. | Refunds "
               "are delayed by a week. | The returns area is too small.",
               "move returns to the empty mezzanine | outsource returns processing for a month",
               "count the returns backlog by customer | clear the mezzanine | "
               "tell customer service about refund delays"),
        _topic("the scanner replacement", "A third of the scanners have cracked screens. | The new model "
               "needs a software update. | The lease runs out in March.",
               "lease the new scanners from March | repair the old scanners for one more year",
               "get a quote for the new scanners | test the new scanner software | "
               "list the broken scanners"),
        _topic("carrier performance", "One carrier missed a fifth of its pickups. | Customers complain "
               "about damaged parcels. | The contract allows penalties.",
               "apply the late-pickup penalties | move half the volume to the second carrier",
               "pull the carrier pickup data | photograph damaged parcels on arrival | "
               "set up a call with the carrier"),
        _topic("the inventory count", "The last count found a two percent discrepancy. | Counting "
               "stops picking for a whole day. | Cycle counting would spread the effort.",
               "switch to weekly cycle counts | keep the annual full count",
               "design the cycle count schedule | investigate the largest discrepancies | "
               "brief the team leads on counting"),
    ),
    "Is the vending machine eating everyone's coins too? | It's freezing by the loading dock today. | "
    "Who's doing the five-a-side on Friday?",
)

_PRODUCT = _domain(
    "product_design_review",
    "the product design review",
    (
        _topic("the onboarding flow", "Half of new users drop off at step three. | The email "
               "verification step confuses people. | Competitors let users explore first.",
               "remove email verification from onboarding | cut onboarding to two steps",
               "build a prototype of the shorter onboarding | run five user interviews | "
               "add analytics to each onboarding step"),
        _topic("the dark mode request", "It is the most requested feature on the forum. | Several "
               "charts are unreadable on dark backgrounds. | Design tokens are not set up for themes.",
               "ship dark mode in the next quarter | build design tokens before dark mode",
               "audit colours in the charts | set up theme design tokens | reply to the forum thread"),
        _topic("accessibility fixes", "The audit found forty issues. | Most are missing labels on "
               "buttons. | Keyboard navigation breaks in the settings page.",
               "fix all critical accessibility issues this sprint | spread the accessibility fixes "
               "over two sprints", "add labels to the buttons | fix keyboard navigation in settings | "
               "share the accessibility audit with the team"),
        _topic("the notification settings", "Users say we send too many emails. | There is no way to "
               "mute a single project. | Support gets daily complaints.",
               "send a weekly digest by default | add per-project mute",
               "design the digest email | write the help article on notifications | "
               "count unsubscribes by email type"),
        _topic("the pricing page redesign", "Visitors do not scroll to the plan comparison. | The "
               "annual discount is hidden. | Sales wants a contact form on the page.",
               "show the annual price first | keep monthly prices first and add a toggle",
               "mock up the new pricing page | set up an A/B test | write the plan comparison copy"),
        _topic("the search results page", "Search returns too many old items. | Filters are hidden "
               "behind a menu. | Power users want saved searches.",
               "sort search results by recent activity | show filters next to the results",
               "prototype the filter panel | ask engineering about saved searches | "
               "collect examples of bad search results"),
    ),
    "Love the new office plants, by the way. | Is anyone else's screen flickering? | "
    "We should do the team lunch again soon.",
)

DOMAINS: tuple[Domain, ...] = (
    _ENGINEERING,
    _SALES,
    _SCHOOL,
    _CLINIC,
    _COUNCIL,
    _RESEARCH,
    _RESTAURANT,
    _NONPROFIT,
    _LOGISTICS,
    _PRODUCT,
)
"""Ten hand-written domains, each with six topics."""
